"""The layers of frd, read from its sources: the core (the shared contract) imports no domain,
library or roof; the libraries (agents, envs) import only the core; a domain imports no other
domain and no roof; the roof reaches the domains through the registry (``frd.domains``). No
module imports another in a circle, counting the imports inside functions (where a circle is
usually hidden)."""
from __future__ import annotations

import ast
import os
from pathlib import Path

import frd

FRD = Path(frd.__file__).parent

LAYERS = {
    "core": {"core"},
    "agents": {"core", "agents"},
    "envs": {"core", "envs"},
    "rl": {"core", "agents", "envs", "rl"},
    "classification": {"core", "agents", "envs", "classification"},
    "flower": {"core", "flower"},
    "cli": {"core", "flower", "cli"},
}
"""Package → the packages it may import."""


def _modules() -> dict[str, Path]:
    """Every module of frd by name; the links frd/agents, frd/envs, frd/classification followed."""
    modules = {}
    for top, _, names in os.walk(FRD, followlinks=True):
        for name in (n for n in names if n.endswith(".py")):
            parts = (Path(top) / name).relative_to(FRD.parent).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = Path(top) / name
    return modules


MODULES = _modules()


def _package(module: str) -> str:
    name = module.split(".")[1] if "." in module else ""
    return name if name in LAYERS else "cli" if name in ("cli", "__main__") else "core"


def _imports(path: Path) -> set[str]:
    """The frd modules ``path`` imports, at its top or inside a function, but not under
    ``if TYPE_CHECKING`` (which never runs)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
                found.update(f"{child.module}.{a.name}" if f"{child.module}.{a.name}" in MODULES else child.module
                             for a in child.names)
            visit(child)

    visit(ast.parse(path.read_text()))
    return {module for module in found if module.split(".")[0] == "frd"}


GRAPH = {module: _imports(path) for module, path in MODULES.items()}


def test_the_walk_sees_every_package_and_the_known_arrows():
    assert {_package(m) for m in MODULES} == set(LAYERS)
    assert "frd.agents.kernel" in GRAPH["frd.rl.fused"]  # a domain on a library
    assert "frd.jit" in GRAPH["frd.classification.distillation.norm_block"]  # a domain on the core
    assert "frd.domains" in GRAPH["frd.cli"] and "frd.errors" in GRAPH["frd.agents.a2c"]


def test_each_package_imports_only_the_layers_below_it():
    wrong = sorted(f"{module} -> {target}" for module, targets in GRAPH.items() for target in targets
                   if _package(target) not in LAYERS[_package(module)])
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


def test_no_module_imports_another_in_a_circle_even_from_inside_a_function():
    state: dict[str, str] = {}
    circles: list[list[str]] = []

    def walk(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in sorted(GRAPH.get(module, ())):
            if state.get(target) == "open":
                circles.append(path[path.index(target):] + [target])
            elif target not in state:
                walk(target, [*path, target])
        state[module] = "done"

    for module in sorted(GRAPH):
        if module not in state:
            walk(module, [module])
    assert not circles, circles
