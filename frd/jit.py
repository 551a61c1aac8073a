"""frd's numba settings and its on-disk cache of compiled code, in one place.

Every jitted function of frd is made by ``compiled``: numba's ``njit`` with the function's own
options, cached on disk (numba's ``cache=True`` files, beside the source or in numba's user-wide
folder) under a stamp of its own. numba stamps a cached function with its own file only, and a
function that calls jitted code of another module carries that code compiled into its own: after
an edit of that other module it kept running the old code from the cache (seen: the fused period
disagreeing with the lockstep runner after an edit of the kernels alone). So the stamp here also
holds a hash of every source the function can reach, worked out from the code itself: the modules
holding ``compiled`` functions that its module refers to (by a module, a jitted function, an
intrinsic, a class, or a dict of options such as a pipeline class), and theirs, transitively, plus
this module (the settings). Reached through another object (an attribute of a class, a closure),
jitted code of a module the walk does not see would escape the stamp; frd's modules refer to what
they call by name.
"""
from __future__ import annotations

import hashlib
import sys
from functools import cache, cached_property
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

import numba
from numba.core import caching
from numba.core.dispatcher import Dispatcher
from numba.core.extending import _Intrinsic

FASTMATH = {"contract", "reassoc", "nsz", "arcp"}
"""The kernels' floating-point licence (``frd.agents.kernel``'s docstring says what it allows)."""
JIT: dict[str, Any] = dict(error_model="numpy", fastmath=FASTMATH, boundscheck=False)
"""The numba options of frd's kernels (``compiled(**JIT)``; classification's add their own)."""


def compiled(**options: Any) -> Callable[[Callable], Dispatcher]:
    """numba's ``njit(**options)``, cached on disk under a stamp of every source it can reach."""

    def decorate(function: Callable) -> Dispatcher:
        dispatcher = numba.njit(**options)(function)
        dispatcher._cache = _StampedCache(function)  # what numba's ``enable_caching`` sets, with frd's stamp
        return dispatcher

    return decorate


def reached_sources(module: ModuleType) -> list[Path]:
    """The source files of ``module`` and of every module holding ``compiled`` code that it reaches
    (the module docstring's walk), and this module's; sorted."""
    seen = {module.__name__: module}
    todo = [module]
    while todo:
        for value in _referred(todo.pop()):
            home = _home(value)
            if home is not None and home.__name__ not in seen and _holds_compiled(home):
                seen[home.__name__] = home
                todo.append(home)
    return sorted({Path(m.__file__).resolve() for m in seen.values() if m.__file__} | {Path(__file__).resolve()})


def _referred(module: ModuleType) -> Iterator[Any]:
    """The module's globals, and the values of those that are dicts (options naming a pipeline class)."""
    for value in list(vars(module).values()):
        yield value
        if isinstance(value, dict):
            yield from list(value.values())


def _home(value: Any) -> ModuleType | None:
    """The module that defines ``value`` (a module, a jitted function, an intrinsic or a class)."""
    if isinstance(value, ModuleType):
        return value
    if isinstance(value, Dispatcher):
        name = value.py_func.__module__
    elif isinstance(value, _Intrinsic):
        name = value._defn.__module__
    elif isinstance(value, type):
        name = value.__module__
    else:
        return None
    return sys.modules.get(name)


def _holds_compiled(module: ModuleType) -> bool:
    return any(isinstance(value, Dispatcher) and isinstance(getattr(value, "_cache", None), _StampedCache)
               for value in list(vars(module).values()))


@cache
def _hashes(module: str) -> tuple[tuple[str, str], ...]:
    """The hashes of the sources ``module`` reaches, once per process (its functions share them)."""
    return tuple((path.name, hashlib.sha256(path.read_bytes()).hexdigest()) for path in reached_sources(sys.modules[module]))


class _Stamp:
    """numba's stamp of a cached function (its file's time and size) and the hashes of the sources it
    reaches, worked out when first compared or saved, not when the function is decorated: by then
    every module it refers to is imported. Saved as a plain tuple."""

    def __init__(self, own: Any, module: str) -> None:
        self.own, self.module = own, module

    @cached_property
    def value(self) -> tuple:
        return self.own, _hashes(self.module)

    def __eq__(self, other: object) -> bool:
        return self.value == (other.value if isinstance(other, _Stamp) else other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]  # compared, never a key

    def __reduce__(self) -> tuple:
        return tuple, (self.value,)


class _Stamped:
    """A numba cache locator whose stamp is a ``_Stamp`` of the function's module."""

    _module: str

    @classmethod
    def from_function(cls, py_func, py_file):
        locator = super().from_function(py_func, py_file)
        if locator is not None:
            locator._module = py_func.__module__
        return locator

    def get_source_stamp(self):
        return _Stamp(super().get_source_stamp(), self._module)


class _StampedImpl(caching.CompileResultCacheImpl):
    """numba's cache of compile results, looking for a place as numba does, stamped as above."""

    _locator_classes: list[Any] = [type(f"Stamped{locator.__name__}", (_Stamped, locator), {})
                                   for locator in caching.CompileResultCacheImpl._locator_classes]


class _StampedCache(caching.FunctionCache):
    _impl_class = _StampedImpl
