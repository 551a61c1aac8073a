"""Method-owned options: each method declares a frozen dataclass beside its code, one docstring
per field. From it come the method's CLI flags, their parsing and help, the check that a flag
belongs to the methods asked for, and the method's part of the resume key. A domain's common
config is documented the same way and its flags come from it too (``add_config_flags``).

A field's flag is ``--`` plus its name with dashes, unless ``field(metadata={"flag": "…"})``
names another (kept for flags users already know, like ``--frd-weighting``). Field types may be
``int``, ``float``, ``str``, ``bool``, ``X | None`` of those, or ``Literal[...]``; a field whose
value has another form gives its parser as ``metadata={"parse": fn}`` (fn raises ValueError).
A config field may also give ``choices`` (the names the code accepts, e.g. ``CHANNELS``: the help
lists them from there, so it cannot drift), ``repeat`` (the flag may be given again, each value
appended) and ``flag_default`` (the value when the flag is not given, where that is not the
field's default: None for "the env's", say; its docstring says what it means). Any field may give
``metavar``, the value's name in the help (default: the field's name in capitals, ``{a,b}`` for a
``Literal``, ``yes|no`` for a bool), and ``was``, its name before a rename: the old flag, key and
keyword still work, and the resume key keeps the old name, so folders written before resume.
"""
from __future__ import annotations

import argparse
import ast
import functools
import inspect
import textwrap
import types
import typing
from dataclasses import MISSING, Field, asdict, dataclass, fields, is_dataclass, replace
from typing import Any, Callable, Collection, Literal, Mapping, Sequence, get_args, get_origin

from frd.errors import FrdError


@dataclass(frozen=True)
class NoOptions:
    """The method has no options of its own."""


@functools.cache
def field_docs(cls: type) -> Mapping[str, str]:
    """The docstring under each dataclass field (CleanRL's ``Args`` style), base classes included.
    Read once per class: parsing the sources was most of the time of every ``frd`` command."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or not is_dataclass(klass):
            continue
        body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0]
        assert isinstance(body, ast.ClassDef)
        statements = body.body
        for node, after in zip(statements, statements[1:]):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                    and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)):
                docs[node.target.id] = " ".join(after.value.value.split())
    return types.MappingProxyType(docs)


def parse_bool(text: str) -> bool:
    """``yes``/``true``/``1`` or ``no``/``false``/``0``."""
    value = text.strip().lower()
    if value in ("yes", "true", "1", "on"):
        return True
    if value in ("no", "false", "0", "off"):
        return False
    raise ValueError(f"expected yes or no, got {text!r}")


def _scalar_parser(kind: Any) -> tuple[Callable[[str], Any], str]:
    """A parser of one command-line value for a field type, and the form it expects."""
    if get_origin(kind) is Literal:
        choices = get_args(kind)

        def choice(text: str) -> Any:
            if text not in choices:
                raise ValueError(f"choose one of {', '.join(map(str, choices))}, got {text!r}")
            return text
        return choice, "|".join(map(str, choices))
    if kind is bool:
        return parse_bool, "yes|no"
    if kind is int:
        return int, "an integer"
    if kind is float:
        return float, "a number"
    if kind is str:
        return str, "a word"
    raise TypeError(f"no command-line parser for option type {kind!r}; give metadata={{'parse': fn}}")


def _not_none(f: Field, kind: Any) -> Any:
    """``X`` of a field typed ``X | None``; else its type."""
    if get_origin(kind) in (typing.Union, types.UnionType):
        inner = [a for a in get_args(kind) if a is not type(None)]
        assert len(inner) == 1, f"option {f.name}: only 'X | None' unions are supported"
        return inner[0]
    return kind


def _field_parser(f: Field, kind: Any) -> tuple[Callable[[str], Any], str]:
    if "parse" in f.metadata:
        return f.metadata["parse"], f.metadata.get("form", "see --help")
    return _scalar_parser(_not_none(f, kind))


def _metavar(f: Field, kind: Any) -> str:
    """How the help names an option's value: as argparse names the other flags' (``--grid S``)."""
    if "metavar" in f.metadata:
        return f.metadata["metavar"]
    kind = _not_none(f, kind)
    if get_origin(kind) is Literal:
        return "{" + ",".join(map(str, get_args(kind))) + "}"
    return "yes|no" if kind is bool else f.name.upper()


@dataclass(frozen=True)
class Flag:
    """One command-line flag and the option field it sets in every method that has it."""

    flag: str
    dest: str
    parse: Callable[[str], Any]
    form: str
    metavar: str
    help: str
    is_bool: bool
    owners: tuple[str, ...]
    former: tuple[str, ...] = ()
    doc: str = ""
    """The field's docstring (``help`` is it with the default)."""
    default: Any = None


def flag_name(f: Field) -> str:
    return "--" + f.metadata.get("flag", f.name.replace("_", "-"))


def former_flags(f: Field) -> tuple[str, ...]:
    """The flag of a field's name before a rename (``metadata["was"]``), if any."""
    return ("--" + f.metadata["was"].replace("_", "-"),) if "was" in f.metadata else ()


def current_names(options: type, values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` by field name, names from before a rename mapped to today's."""
    renamed = {f.metadata["was"]: f.name for f in fields(options) if "was" in f.metadata}
    return {renamed.get(k, k): v for k, v in values.items()}


def option_flags(registry: Mapping[str, Any]) -> dict[str, Flag]:
    """Every option flag of the methods in ``registry`` (name → class with ``Options``)."""
    flags: dict[str, Flag] = {}
    for method, klass in registry.items():
        options = klass.Options
        hints = typing.get_type_hints(options)
        docs = field_docs(options)
        for f in fields(options):
            name = flag_name(f)
            if name in flags:
                flags[name] = replace(flags[name], owners=(*flags[name].owners, method))
                continue
            parse, form = _field_parser(f, hints[f.name])
            default = f.default if f.default is not MISSING else None
            flags[name] = Flag(name, f.name, parse, form, _metavar(f, hints[f.name]),
                               f"{docs.get(f.name, '')} (default {default})",
                               hints[f.name] is bool, (method,), former_flags(f), docs.get(f.name, ""), default)
    return flags


def _typed(flag: Flag) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            return flag.parse(text)
        except (ValueError, TypeError):
            raise argparse.ArgumentTypeError(f"expected {flag.form}, got {text!r}") from None
    parse.__name__ = flag.form  # argparse names the type in its own messages
    return parse


def add_option_flags(parser: argparse.ArgumentParser, registry: Mapping[str, Any]) -> None:
    """Add every method's option flags; a flag not given is absent from the parsed namespace."""
    group = parser.add_argument_group("method options (each applies only to the methods named)")
    for flag in option_flags(registry).values():
        kwargs: dict[str, Any] = dict(dest=f"option:{flag.dest}", type=_typed(flag), default=argparse.SUPPRESS,
                                      metavar=flag.metavar, help=f"[{', '.join(flag.owners)}] {flag.help}")
        if flag.is_bool:  # ``--frl-critic`` alone means yes; ``--frl-critic no`` is explicit
            kwargs.update(nargs="?", const=True)
        group.add_argument(flag.flag, *flag.former, **kwargs)


def config_flags(config: type, skip: Collection[str] = ()) -> list[Field]:
    """The fields of the dataclass ``config`` that are flags: all but those in ``skip``."""
    return [f for f in fields(config) if f.name not in skip]


def add_config_flags(parser: argparse.ArgumentParser, config: type, skip: Collection[str] = ()) -> None:
    """One flag per field of ``config`` but those in ``skip``, in their order: its help the field's
    docstring and default, its value parsed by the field's type (ints and numbers as argparse
    parses them, so its messages stay the same) or by ``metadata["parse"]``."""
    hints, docs = typing.get_type_hints(config), field_docs(config)
    for f in config_flags(config, skip):
        default = f.metadata.get("flag_default", f.default if f.default is not MISSING else None)
        shown = f" (default {default})" if isinstance(default, (int, float, str)) and default != "" else ""
        kwargs: dict[str, Any] = dict(dest=f.name, default=default, help=(docs.get(f.name, "") + shown).replace("%", "%%"))
        parse = _field_parser(f, hints[f.name])[0]
        if parse is not str:
            kwargs["type"] = parse
        if f.metadata.get("repeat"):
            kwargs.update(action="append", default=[])
        if "metavar" in f.metadata:
            kwargs["metavar"] = f.metadata["metavar"]
        if hints[f.name] is bool:  # ``--error-feedback`` alone means yes; ``--error-feedback no`` is explicit
            kwargs.update(nargs="?", const=True, metavar="yes|no")
        if "choices" in f.metadata:
            kwargs["choices"] = list(f.metadata["choices"])
        parser.add_argument(flag_name(f), **kwargs)


def document_keywords(builder: Callable[..., Any], config: type, registry: Mapping[str, Any],
                      skip: Collection[str] = ()) -> None:
    """Append to ``builder``'s docstring (``rl_config``, ``cls_config``) its keyword arguments: the
    fields of ``config`` but ``skip`` and every method's options, each with its default and its
    docstring, so that ``help()`` lists what ``--help`` does, from the same dataclasses."""
    def entry(head: str, doc: str) -> list[str]:
        return [head, *textwrap.wrap(doc, 92, initial_indent="    ", subsequent_indent="    ")]

    docs = field_docs(config)
    lines = [f"Keyword arguments: the fields of {config.__name__}, named as the command's flags (dashes as",
             "underscores), with their defaults:", ""]
    for f in config_flags(config, skip):
        default = f.default_factory() if f.default is MISSING and f.default_factory is not MISSING else f.default
        lines += entry(f"{f.name} = {f.metadata.get('flag_default', default)!r}", docs.get(f.name, ""))
    lines += ["", "Method options, each given to every method listed (in brackets) that has it:", ""]
    for flag in option_flags(registry).values():
        lines += entry(f"{flag.dest} = {flag.default!r}  [{', '.join(flag.owners)}]", flag.doc)
    builder.__doc__ = inspect.cleandoc(builder.__doc__ or "") + "\n\n" + "\n".join(lines)


def add_out_flag(parser: argparse.ArgumentParser, where: str = "") -> None:
    """``--out``, required by every command that runs an experiment [our choice]: the folder is the
    experiment (rerunning a command resumes it), so no default folder is shared by experiments that
    differ in a flag the name leaves out."""
    parser.add_argument("--out", metavar="DIR", required=True,
                        help=f"results folder{where}, required (rerun the same command to resume)")


def given_config(args: argparse.Namespace, config: type, skip: Collection[str] = ()) -> dict[str, Any]:
    """The values of ``config``'s flags (``add_config_flags``) by field name; a repeated flag's as a tuple."""
    return {f.name: tuple(getattr(args, f.name)) if f.metadata.get("repeat") else getattr(args, f.name)
            for f in config_flags(config, skip)}


def given_options(args: argparse.Namespace) -> dict[str, Any]:
    """The option flags given on the command line, by field name."""
    return {k.split(":", 1)[1]: v for k, v in vars(args).items() if k.startswith("option:")}


def build_options(registry: Mapping[str, Any], methods: Sequence[str], values: Mapping[str, Any],
                  presets: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Each method's options from ``values`` (field name → value); every value must belong to at
    least one of ``methods``, else the error names the methods it belongs to."""
    owners: dict[str, list[str]] = {}
    flags: dict[str, str] = {}
    for name, klass in registry.items():
        values = current_names(klass.Options, values)
        for f in fields(klass.Options):
            owners.setdefault(f.name, []).append(name)
            flags[f.name] = flag_name(f)
    for key in values:
        belongs = owners.get(key, [])
        if not any(m in belongs for m in methods):
            flag = flags.get(key, "--" + key.replace("_", "-"))
            if not belongs:
                raise FrdError(f"{flag} is not an option of any method")
            raise FrdError(f"{flag} is an option of {', '.join(belongs)}, not of {', '.join(methods)}")
    built = {}
    for method in methods:
        options = registry[method].Options
        names = {f.name for f in fields(options)}
        preset = {k: v for k, v in (presets or {}).get(method, {}).items() if k in names}
        built[method] = options(**{**preset, **{k: v for k, v in values.items() if k in names}})
        check_choices(built[method])
    return built


def check_choices(options: Any) -> None:
    """Every ``Literal`` field holds one of its choices (the CLI checks this too, configs built in
    code are checked here)."""
    hints = typing.get_type_hints(type(options))
    for f in fields(options):
        if get_origin(hints[f.name]) is Literal and getattr(options, f.name) not in get_args(hints[f.name]):
            raise FrdError(f"{flag_name(f)} must be one of {', '.join(map(str, get_args(hints[f.name])))}, "
                           f"got {getattr(options, f.name)!r}")


def options_key(options: Any) -> dict[str, Any]:
    """The options' part of a resume key (JSON-ready), a renamed field under its old name."""
    if not (is_dataclass(options) and not isinstance(options, type)):
        return dict(options)
    was = {f.name: f.metadata["was"] for f in fields(options) if "was" in f.metadata}
    return {was.get(k, k): v for k, v in asdict(options).items()}


def at_least(options: Any, **lows: float) -> None:
    """Check ``options.<name> >= low`` (skipping None) with an error naming the flag."""
    for f in fields(options):
        if f.name in lows:
            value = getattr(options, f.name)
            if value is not None and value < lows[f.name]:
                raise FrdError(f"{flag_name(f)} must be at least {lows[f.name]:g}, got {value}")


def positive(options: Any, *names: str) -> None:
    """Check ``options.<name> > 0`` (skipping None) with an error naming the flag."""
    for f in fields(options):
        if f.name in names:
            value = getattr(options, f.name)
            if value is not None and not value > 0:
                raise FrdError(f"{flag_name(f)} must be > 0, got {value}")
