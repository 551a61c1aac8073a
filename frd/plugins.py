"""Methods from outside the repository: an installed package declares them under its domain's
entry-point group, and they join that domain's registry as if built in (their options become
flags, ``config.json`` and the resume key hold them):

    [project.entry-points."frd.rl_methods"]
    median-frl = "my_package:MedianFRL"

(``frd.cls_methods`` for classification; ``tests/plugin_package/`` is a worked example). Their
sources join the ``code`` hash of every provenance row (``frd.results.code_hash``). A plug-in
named like a built-in method is left out, and the ``frd`` command refuses to run while one is
installed, in one line naming it (``check``) [our choice: a built-in name never changes meaning].
"""
from __future__ import annotations

import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import Mapping, TypeVar

from frd.errors import FrdError

RL_GROUP = "frd.rl_methods"
CLS_GROUP = "frd.cls_methods"
T = TypeVar("T")

_loaded: dict[str, type] = {}
"""Every plug-in method loaded in this process, by name."""
_clashes: list[str] = []
"""A line per plug-in that was left out for a built-in's name."""


def plugged_in(group: str, builtins: Mapping[str, type[T]]) -> dict[str, type[T]]:
    """The methods installed packages declare under ``group``, but for those named like one of ``builtins``."""
    found: dict[str, type[T]] = {}
    for entry in entry_points(group=group):
        if entry.name in builtins:
            where = entry.dist.name if entry.dist is not None else entry.value
            _clashes.append(f"the installed package {where} declares a method {entry.name!r} under {group}, "
                            f"the name of a built-in method; rename its entry point (or uninstall it)")
            continue
        found[entry.name] = _loaded[entry.name] = entry.load()
    return found


def check() -> None:
    """A one-line ``FrdError`` while a plug-in clashes with a built-in method."""
    if _clashes:
        raise FrdError(_clashes[0])


def source_roots() -> list[tuple[str, Path]]:
    """(top-level module name, its folder or file) of every loaded plug-in, sorted, once each:
    what the provenance hash reads besides frd."""
    roots = {}
    for method in _loaded.values():
        top = method.__module__.partition(".")[0]
        file = Path(getattr(sys.modules[top], "__file__", "") or "")
        roots[top] = file.parent if file.name == "__init__.py" else file
    return sorted(roots.items())
