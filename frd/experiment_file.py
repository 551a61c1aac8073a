"""An experiment: a domain, its settings and the axes of a sweep, from a TOML file (``frd run``) or
from a command line that sweeps (``frd rl --grid 5,10,30``). Both resolve to one ``Experiment``, and
each of its cells is an argument list of the domain's experiment command (``frd rl``, ``frd cls``),
so a file's keys are that command's flags and are checked by its own parser: they cannot drift.

The file::

    domain = "rl"          # whose experiment command runs each cell: frd rl, frd cls
    method = "frd"         # any flag of that command, without its dashes (- or _ alike); "frd,pd": an axis
    seeds = 4
    [sweep]                # optional: axes, each a list of values; the cells are their product
    grid = [5, 10, 30]

Values are TOML numbers, strings, ``true``/``false`` (a switch, ``paper = true``; or a yes|no
option) and, for a repeatable flag, a list (``channel-opt = ["p_up_dbm=15"]``). An axis may name
bundles of settings instead of listing one flag's values, and ``skip`` leaves cells out::

    [sweep]
    population = { homogeneous = {}, widths = { agent-spec = "h=32;h=64;h=128" } }
    skip = [{ population = "widths", variant = "frl" }]
    [sweep.variant]
    frl = { method = "frl" }
    "pd steps" = { method = "pd", distill-steps = 20 }

Flags of the command after the file on ``frd run``'s line override it (``overridden``). Where the runs go
and how they run (``--out``, ``--backend``, …) are no settings: they are ``frd run``'s flags.
The resolved experiment (``toml``) lists every setting that differs from the command's default by
its flag name, sorted, values typed as the flag parses them, then the axes in their order: the file
form and the inline form of one experiment resolve to the same text.
"""
from __future__ import annotations

import argparse
import difflib
import itertools
import json
import math
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection, Iterable, Mapping, Sequence

import tomllib

from frd.errors import FrdError

RECORD = "experiment.toml"
"""An experiment's record (``frd.sweep``): ``OUT/experiment.toml``, the resolved experiment …"""
CELLS = "cells"
"""… and ``OUT/cells/<cell id>/``, one results folder per cell."""
DOMAIN_KEY = "domain"
SWEEP_KEY = "sweep"
SKIP_KEY = "skip"
"""In ``[sweep]``: the cells to leave out, e.g. ``skip = [{ population = "widths", method = "frl" }]``."""
NO_AXES = "base"
"""The id of the one cell of an experiment without axes."""
SWEEP_FLAG = "--sweep"
UNSWEPT = ("method", "methods")
"""Flags whose comma lists are the command's own (``--methods frd,pd`` compares), never split by
``split_inline``; in an experiment, whose cells run one method each, such a list is an axis over
the methods (``resolve``), as ``--sweep method=frd,pd`` and ``[sweep] method = [...]`` are."""


def _text(value: Any) -> str:
    """A setting as its command-line text."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return repr(value) if isinstance(value, float) else str(value)


def _is_switch(action: argparse.Action) -> bool:
    return action.nargs == 0


def _repeats(action: argparse.Action) -> bool:
    return isinstance(action, argparse._AppendAction)


def _parsed(action: argparse.Action, text: str) -> Any:
    """``text`` as ``action`` parses it; ValueError if it does not."""
    try:
        value = action.type(text) if callable(action.type) else text
    except (ValueError, TypeError, argparse.ArgumentTypeError) as exc:
        raise ValueError(str(exc) or f"invalid value {text!r}") from None
    if action.choices is not None and value not in action.choices:
        raise ValueError(f"choose one of {', '.join(map(str, action.choices))}, got {text!r}")
    return value


def _parses(action: argparse.Action, text: str) -> bool:
    try:
        _parsed(action, text)
    except ValueError:
        return False
    return True


def suggest(name: str, known: Collection[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=3)
    return f"; did you mean {' or '.join(close)}?" if close else ""


def unknown_flag(name: str, known: Iterable[str], owner: str = "") -> str:
    """The error for a flag no command has, naming the flags it may have meant: those it begins
    (what an abbreviation used to pick), those spelt like it, and those holding its words
    (``--seed``: ``--seeds`` and ``--first-seed``)."""
    flags = sorted({flag for flag in known if flag.startswith("--")})
    words = set(name.lstrip("-").split("-"))
    near = [flag for flag in flags if flag.startswith(name)]
    near += difflib.get_close_matches(name, flags, n=3, cutoff=0.8)
    near += [flag for flag in flags if words <= set(flag[2:].split("-"))]
    near = list(dict.fromkeys(near))[:4]
    return f"unknown flag {name}{owner}" + (f"; did you mean {' or '.join(near)}?" if near else "")


class Command:
    """The flags of a domain's experiment command, as settings: their keys (the flag without
    ``--``), each value checked and typed as the flag parses it, and a setting's arguments."""

    def __init__(self, domain: str, parser: argparse.ArgumentParser, run_level: Collection[str]) -> None:
        self.domain, self.run_level = domain, set(run_level)
        self.options = {o[2:]: a for a in parser._actions for o in a.option_strings if o.startswith("--")}
        """Every flag of the command, run-level ones included."""
        self.flags = {key: action for key, action in self.options.items()
                      if key not in self.run_level and action.dest not in ("help", SWEEP_KEY)}
        """Its flags that are settings."""

    @staticmethod
    def normal(name: str) -> str:
        """A file key as the flag it names, unchecked (``max_episodes`` → ``max-episodes``)."""
        return name.removeprefix("--").replace("_", "-")

    def key(self, name: str, where: str) -> str:
        """The flag a file key names (``max_episodes`` or ``max-episodes``)."""
        key = self.normal(name)
        if key in self.flags:
            return key
        if key in self.run_level:
            raise FrdError(f"{where}{name} is not a setting of the experiment: give --{key} to the command")
        raise FrdError(f"{where}unknown key {name!r} (not a flag of frd {self.domain}){suggest(key, self.flags)}")

    def value(self, key: str, value: Any, where: str) -> Any:
        """``value`` checked and typed as ``--key`` parses it (a repeatable flag's: a list)."""
        action = self.flags[key]
        if _is_switch(action):
            if not isinstance(value, bool):
                raise FrdError(f"{where}{key} is a switch: true or false, got {value!r}")
            return value
        if _repeats(action):
            return [self._scalar(key, item, where) for item in (value if isinstance(value, list) else [value])]
        return self._scalar(key, value, where)

    def _scalar(self, key: str, value: Any, where: str) -> Any:
        if isinstance(value, (list, dict)):
            raise FrdError(f"{where}{key} takes one value, got {json.dumps(value, default=str)}; "
                           f"to sweep it, list its values under [{SWEEP_KEY}]")
        try:
            typed = _parsed(self.flags[key], _text(value))
        except ValueError as exc:
            raise FrdError(f"{where}{key}: {exc}") from None
        return typed if isinstance(typed, (bool, int, float, str)) else _text(value)

    def arguments(self, key: str, value: Any) -> list[str]:
        """The command-line arguments that give ``--key`` this (checked) value."""
        flag, action = f"--{key}", self.flags[key]
        if _is_switch(action):
            return [flag] if value else []
        if _repeats(action):
            return [word for item in value for word in (flag, _text(item))]
        return [flag, _text(value)]


@dataclass(frozen=True)
class Cell:
    id: str
    values: Mapping[str, Any]
    """Axis → this cell's value."""


def shown(value: Any) -> str:
    """A setting's value as a cell id and a table show it (a repeatable flag's joined by +)."""
    return "+".join(map(_text, value)) if isinstance(value, list) else _text(value)


def _id_text(value: Any) -> str:
    return urllib.parse.quote(shown(value), safe="=,;:+.@-_ ")


@dataclass(frozen=True)
class Experiment:
    """A domain's settings (flag key → value) and the axes of its sweep (key → values, in order).

    An axis may instead name bundles of settings (``bundles``: axis → name → settings; its values
    are the names), e.g. ``population = { homogeneous = {}, widths = { agent-spec = "h=32;h=64" } }``:
    what one flag cannot say. ``skip`` leaves out the cells that match one of its entries (axis →
    value), e.g. a method a population cannot run."""

    domain: str
    settings: Mapping[str, Any]
    axes: Mapping[str, Sequence[Any]]
    bundles: Mapping[str, Mapping[str, Mapping[str, Any]]] = field(default_factory=dict)
    skip: Sequence[Mapping[str, Any]] = ()

    @classmethod
    def of_record(cls, domain: str, settings: Mapping[str, Any], axes: Mapping[str, Any]) -> Experiment:
        """The experiment a record (``toml``'s text, read by ``read_file``) holds, taken as written."""
        plain = {k: v for k, v in axes.items() if k != SKIP_KEY}
        bundles = {k: v for k, v in plain.items() if isinstance(v, dict)}
        return cls(domain, settings, {k: list(v) for k, v in plain.items()}, bundles, list(axes.get(SKIP_KEY, [])))

    def cells(self) -> list[Cell]:
        """The product of the axes, the first outermost, but for those ``skip`` matches; a cell's id
        names its values, e.g. ``grid=5`` or ``method=frd,agents=2`` (``base`` without axes)."""
        cells = []
        for values in itertools.product(*self.axes.values()):
            chosen = dict(zip(self.axes, values))
            if any(all(chosen[axis] == value for axis, value in entry.items()) for entry in self.skip):
                continue
            cells.append(Cell(",".join(f"{k}={_id_text(v)}" for k, v in chosen.items()) or NO_AXES, chosen))
        return cells

    def cell_settings(self, cell: Cell) -> dict[str, Any]:
        """Every setting of ``cell``: the experiment's, each plain axis's value, each bundle's settings."""
        merged = dict(self.settings)
        for axis, value in cell.values.items():
            merged.update(self.bundles[axis][value] if axis in self.bundles else {axis: value})
        return merged

    def arguments(self, command: Command, cell: Cell) -> list[str]:
        """``cell``'s arguments of the experiment command (without ``--out``)."""
        merged = self.cell_settings(cell)
        return [word for key in sorted(merged) for word in command.arguments(key, merged[key])]

    def method_axes(self) -> set[str]:
        """The axes that choose a cell's method: ``method``, and a bundle axis whose bundles set it."""
        return {axis for axis in self.axes
                if axis == "method" or any("method" in bundle for bundle in self.bundles.get(axis, {}).values())}

    def flat(self) -> dict[str, Any]:
        """Every setting by name, the axes as ``sweep.<key>``: what two experiments compare."""
        axes = {f"{SWEEP_KEY}.{k}": {n: dict(b) for n, b in self.bundles[k].items()} if k in self.bundles else list(v)
                for k, v in self.axes.items()}
        skip = {f"{SWEEP_KEY}.{SKIP_KEY}": [dict(entry) for entry in self.skip]} if self.skip else {}
        return {DOMAIN_KEY: self.domain, **self.settings, **axes, **skip}

    def toml(self) -> str:
        """The resolved experiment as an experiment file (``frd run`` reads it back unchanged)."""
        lines = ["# The resolved experiment of this folder, written by frd; frd run this file --out this folder resumes it.",
                 f"{DOMAIN_KEY} = {_toml(self.domain)}"]
        lines += [f"{key} = {_toml(self.settings[key])}" for key in sorted(self.settings)]
        if self.axes:
            lines += ["", f"[{SWEEP_KEY}]"]
            lines += [f"{_toml_key(key)} = {_toml(self.bundles.get(key, list(values)))}" for key, values in self.axes.items()]
            if self.skip:
                lines.append(f"{SKIP_KEY} = {_toml(list(self.skip))}")
        return "\n".join(lines) + "\n"


def _toml_key(key: str) -> str:
    return key if key and all(c.isascii() and (c.isalnum() or c in "-_") for c in key) else json.dumps(key)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return ("-inf" if value < 0 else "inf") if math.isinf(value) else "nan" if math.isnan(value) else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml(v)}" for k, v in value.items()) + " }" if value else "{}"
    return "[" + ", ".join(map(_toml, value)) + "]"


def _checked_settings(command: Command, settings: Mapping[str, Any], where: str) -> dict[str, Any]:
    given: dict[str, Any] = {}
    for name, value in settings.items():
        key = command.key(name, where)
        if key in given:
            raise FrdError(f"{where}{key} is given twice")
        given[key] = command.value(key, value, where)
    return given


def _bundles(command: Command, axis: str, bundles: Mapping[str, Any], where: str) -> dict[str, dict[str, Any]]:
    """An axis of named bundles of settings, each checked."""
    if not bundles or not all(isinstance(b, dict) for b in bundles.values()):
        raise FrdError(f"{where}the axis {axis} names bundles of settings: each a table, e.g. "
                       f'{axis} = {{ small = {{ hidden = 32 }}, large = {{ hidden = 128 }} }}')
    return {str(name): _checked_settings(command, bundle, f"{where}{axis}.{name}: ") for name, bundle in bundles.items()}


def _skipped(raw: Any, axes: Mapping[str, list], where: str) -> list[dict[str, Any]]:
    """``skip``'s entries, each axis named and each value one of its axis's."""
    if not isinstance(raw, list) or not all(isinstance(entry, dict) and entry for entry in raw):
        raise FrdError(f'{where}{SKIP_KEY} takes a list of tables, e.g. {SKIP_KEY} = [{{ agents = 8, method = "frl" }}]')
    entries = []
    for entry in raw:
        checked = {}
        for name, value in entry.items():
            axis = name if name in axes else Command.normal(name)
            if axis not in axes:
                raise FrdError(f"{where}{SKIP_KEY}: {name} is no axis{suggest(axis, axes)}")
            match = [v for v in axes[axis] if shown(v) == shown(value) or v == value]
            if not match:
                raise FrdError(f"{where}{SKIP_KEY}: {axis} has no value {value!r}")
            checked[axis] = match[0]
        entries.append(checked)
    return entries


def resolve(command: Command, settings: Mapping[str, Any], axes: Mapping[str, Any], where: str) -> Experiment:
    """The experiment of raw settings and axes (file keys, TOML or command-line values), every
    key and value checked; ``where`` starts each error (``grid.toml: ``)."""
    given = _checked_settings(command, settings, where)
    # a cell runs one method: a list of them (method = "fl,fd", as frd cls takes it) is an axis, the first
    listed = {key: value.split(",") for key, value in given.items()
              if key in UNSWEPT and isinstance(value, str) and "," in value}
    resolved = {key: value for key, value in given.items() if key not in listed
                and value not in (command.flags[key].default, [])}  # a default given is as if not given
    swept: dict[str, list] = {}
    bundles: dict[str, dict[str, dict[str, Any]]] = {}
    for name, values in [*listed.items(), *axes.items()]:
        if name == SKIP_KEY:
            continue
        if isinstance(values, dict):
            if name in swept:
                raise FrdError(f"{where}{name} is swept twice")
            bundles[name] = _bundles(command, name, values, where)
            swept[name] = list(bundles[name])
            continue
        key = command.key(name, where)
        if key in given and (key in swept or key not in listed):
            raise FrdError(f"{where}{key} is both set and swept: keep one")
        if key in swept:
            raise FrdError(f"{where}{key} is swept twice")
        if not isinstance(values, list) or not values:
            raise FrdError(f"{where}the axis {key} needs a list of values, e.g. {key} = [1, 2], got {values!r}")
        swept[key] = [command.value(key, value, where) for value in values]
        texts = [_id_text(v) for v in swept[key]]
        twice = sorted({t for t in texts if texts.count(t) > 1})
        if twice:
            raise FrdError(f"{where}the axis {key} lists {', '.join(twice)} twice")
    owners: dict[str, str] = {key: "the settings" for key in given if key not in listed} | {
        key: f"the axis {key}" for key in swept if key not in bundles}
    for axis, named in bundles.items():
        for key in dict.fromkeys(k for bundle in named.values() for k in bundle):
            if key in owners and owners[key] != f"the axis {axis}":
                raise FrdError(f"{where}{key} is set by the axis {axis} and by {owners[key]}: keep one")
            owners[key] = f"the axis {axis}"
    skip = _skipped(axes[SKIP_KEY], swept, where) if SKIP_KEY in axes else []
    return Experiment(command.domain, resolved, swept, bundles, skip)


def read_file(path: Path) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(domain, settings, axes) of an experiment file, as written (checked by ``resolve``)."""
    where = f"{path.name}: "
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise FrdError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise FrdError(f"{where}not TOML: {exc}") from None
    domain = data.pop(DOMAIN_KEY, None)
    if not isinstance(domain, str):
        raise FrdError(f'{where}name the domain, e.g. {DOMAIN_KEY} = "rl"')
    axes = data.pop(SWEEP_KEY, {})
    if not isinstance(axes, dict):
        raise FrdError(f"{where}{SWEEP_KEY} must be a table: [{SWEEP_KEY}] then one axis per line, e.g. grid = [5, 10]")
    return domain, data, axes


def split_inline(command: Command, argv: Sequence[str]) -> tuple[dict[str, list[str]], list[str]]:
    """The axes a command line sweeps (``--sweep KEY=V1,V2`` and ``--flag V1,V2`` where the flag
    takes a number or a choice and only the comma list does not parse as one) and the arguments
    left; axis values as texts."""
    axes: dict[str, list[str]] = {}
    rest: list[str] = []
    words = list(argv)
    while words:
        word = words.pop(0)
        name, attached, text = word.partition("=") if word.startswith("--") else (word, "", "")
        action = command.flags.get(name[2:]) if name.startswith("--") else None
        if name == SWEEP_FLAG:
            spec = text if attached else (words.pop(0) if words else "")
            key, has_values, values = spec.partition("=")
            if not has_values or not key or not values:
                raise FrdError(f"{SWEEP_FLAG} takes KEY=V1,V2,…, e.g. {SWEEP_FLAG} grid=5,10,30; got {spec!r}")
            _add_axis(axes, command.key(key, f"{SWEEP_FLAG}: "), values)
            continue
        if action is None or action.nargs is not None or _repeats(action) or action.dest in UNSWEPT:
            rest.append(word)
            continue
        value = text if attached else (words.pop(0) if words else None)
        if value is not None and _sweeps(action, value):
            _add_axis(axes, name[2:], value)
        else:
            rest += [word] if attached or value is None else [word, value]
    return axes, rest


def _add_axis(axes: dict[str, list[str]], key: str, values: str) -> None:
    if key in axes:
        raise FrdError(f"{SWEEP_FLAG}: {key} is swept twice")
    axes[key] = values.split(",")


def _sweeps(action: argparse.Action, value: str) -> bool:
    """A comma list of a number's or a choice's values (which the flag alone would refuse)."""
    if "," not in value or (action.type is None and action.choices is None) or _parses(action, value):
        return False
    return all(_parses(action, piece) for piece in value.split(","))


def given_settings(command: Command, argv: Sequence[str]) -> dict[str, Any]:
    """The settings an argument list gives (already parsed by the command: well formed), as texts
    or, for a switch, True; flags not given are absent, run-level flags left out."""
    settings: dict[str, Any] = {}
    words = list(argv)
    while words:
        name, attached, text = words.pop(0).partition("=")
        action = command.options.get(name[2:])
        if action is None:  # argparse took these words: no flag here is unknown
            continue
        takes_value = not _is_switch(action) and (action.nargs is None or bool(words and not words[0].startswith("-")))
        value = text if attached else (words.pop(0) if takes_value else None)
        if name[2:] not in command.flags:
            continue
        if _repeats(action):
            settings.setdefault(name[2:], []).append(value)
        else:
            settings[name[2:]] = True if value is None else value
    return settings


def override_arguments(command: Command, argv: Sequence[str]) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The settings and axes that flags of the experiment command given after an experiment file
    (``frd run exp.toml --seeds 5 --grid 5,10``) set, every flag and value checked: an unknown flag
    names those meant, a value is typed as its flag parses it."""
    axes, rest = split_inline(command, argv)
    settings: dict[str, Any] = {}
    words = list(rest)
    while words:
        word = words.pop(0)
        name, attached, text = word.partition("=")
        key = name[2:]
        if not name.startswith("--") or not key:
            raise FrdError(f"{word!r} after the experiment file is no flag: give settings as --KEY VALUE")
        if key not in command.flags:
            raise FrdError(unknown_flag(name, [f"--{flag}" for flag in command.flags], f" of frd {command.domain}"))
        action = command.flags[key]
        if _is_switch(action):
            if attached:
                raise FrdError(f"{name} is a switch: it takes no value")
            value: Any = True
        elif attached:
            value = text
        elif words and not (words[0].startswith("--") and words[0][2:3].isalpha()):
            value = words.pop(0)
        else:
            raise FrdError(f"{name} needs a value")
        if _repeats(action):
            settings.setdefault(key, []).append(value)
        elif key in settings:
            raise FrdError(f"{name} is given twice")
        else:
            settings[key] = value
    checked = resolve(command, settings, axes, "--")  # each flag and value checked, named by its flag
    return {key: checked.settings.get(key, command.flags[key].default) for key in settings}, \
        {key: list(values) for key, values in checked.axes.items()}


def overridden(command: Command, settings: Mapping[str, Any], axes: Mapping[str, Any],
               overrides: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A file's settings and axes with the flags given after it applied (``override_arguments``):
    a flag's value replaces the file's, a key it sets is no longer swept, and one it sweeps is no
    longer set (an axis keeps its place; a new one comes last)."""
    set_here, swept_here = override_arguments(command, overrides)
    given = set(set_here) | set(swept_here)
    kept = {name: value for name, value in settings.items() if Command.normal(name) not in given}
    merged_axes = {}
    for name, values in axes.items():
        key = Command.normal(name)
        if key in swept_here:
            merged_axes[key] = swept_here[key]
        elif key not in set_here:
            merged_axes[name] = values
    new_axes = {key: values for key, values in swept_here.items() if key not in merged_axes}
    return {**kept, **set_here}, {**merged_axes, **new_axes}
