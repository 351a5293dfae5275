"""The import graph of the shipped packages, read with ``ast`` (imports inside functions included):
no cycle, and no import against the layer order.

Layers, top to bottom: ``primekit_cli`` (the app) -> ``gepa_cli`` and ``rl_backend`` (side by side, neither
imports the other) -> ``evalkit``. Inside evalkit, the bottom layer (:data:`BOTTOM_PACKAGE`) imports nothing of
the project but itself, so everything else can use them without a cycle, and the engine
(``evalkit.model``) never imports the client layer built on it (``evalkit.clients``). An edge goes to the most
specific module an import names (``from evalkit.clients import redact`` -> ``evalkit.core.redact``), as
import-linter counts them; ``if TYPE_CHECKING:`` imports count too (they are still a dependency).
"""

from __future__ import annotations

import ast
from pathlib import Path
from support import REPO

ROOT = REPO
PACKAGES = ("primekit_cli", "gepa_cli", "rl_backend", "evalkit")
RANK = {"primekit_cli": 2, "gepa_cli": 1, "rl_backend": 1, "evalkit": 0}
LAYERS = "primekit_cli -> gepa_cli, rl_backend -> evalkit"
BOTTOM_PACKAGE = "evalkit.core"
"""The bottom layer: its modules import nothing of the project but each other."""
BELOW = {"evalkit.model": ("evalkit.clients", "the engine sits below the client layer")}
"""Inside evalkit: a subpackage that must not import another (which builds on it)."""


def module_files() -> dict[str, Path]:
    """Every module of the shipped packages by dotted name (a package by its own name)."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports anywhere in its file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:  # `import evalkit.x.y` names a module; trim to one that exists
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = module_files()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a path (first node repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for source, targets in sorted(graph.items()):
        top = source.split(".")[0]
        for target in sorted(targets):
            other = target.split(".")[0]
            if RANK[other] > RANK[top] or (RANK[other] == RANK[top] and other != top):
                bad.append(f"{source} -> {target} (against {LAYERS})")
            elif _within(source, [BOTTOM_PACKAGE]) and not _within(target, [BOTTOM_PACKAGE]):
                bad.append(f"{source} -> {target} (a module of {BOTTOM_PACKAGE} imports only {BOTTOM_PACKAGE})")
            elif _within(source, BELOW) and _within(target, [BELOW[_within(source, BELOW)][0]]):
                bad.append(f"{source} -> {target} ({BELOW[_within(source, BELOW)][1]})")
    return bad


def _within(module: str, packages) -> str | None:
    """The one of ``packages`` that ``module`` is (or is inside), else None."""
    return next((p for p in packages if module == p or module.startswith(p + ".")), None)


def test_the_import_graph_has_no_cycle():
    assert find_cycle(import_graph()) is None


def test_no_import_goes_against_the_layers():
    assert layer_violations(import_graph()) == []


def test_the_checks_see_imports_inside_functions_and_relative_ones():
    """The checker itself: a cycle closed only by an import inside a function, and an upward one."""
    graph = {"evalkit.a": {"evalkit.b"}, "evalkit.b": set()}
    assert find_cycle(graph) is None
    graph["evalkit.b"].add("evalkit.a")
    assert find_cycle(graph) == ["evalkit.a", "evalkit.b", "evalkit.a"]
    assert layer_violations({"evalkit.core.errors": {"evalkit.core.redact", "evalkit.clients.spec"}, "evalkit.x": {"gepa_cli.runner"},
                             "gepa_cli.a": {"rl_backend.b"}, "primekit_cli.a": {"evalkit.core.errors"},
                             "evalkit.model.registry": {"evalkit.clients.spec"}}) == [
        "evalkit.core.errors -> evalkit.clients.spec (a module of evalkit.core imports only evalkit.core)",
        "evalkit.model.registry -> evalkit.clients.spec (the engine sits below the client layer)",
        "evalkit.x -> gepa_cli.runner (against primekit_cli -> gepa_cli, rl_backend -> evalkit)",
        "gepa_cli.a -> rl_backend.b (against primekit_cli -> gepa_cli, rl_backend -> evalkit)",
    ]
    source = "def f():\n    from evalkit.core import errors\n    from .sub import thing\n"
    path = ROOT / "evalkit" / "envs" / "base.py"
    modules = {"evalkit.core.errors": path, "evalkit.envs.sub": path, "evalkit.envs.base": path}
    tree_imports = _imports_of_source("evalkit.envs.base", source, modules)
    assert tree_imports == {"evalkit.core.errors", "evalkit.envs.sub"}


def _imports_of_source(name: str, source: str, modules: dict[str, Path]) -> set[str]:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "base.py"
        path.write_text(source)
        return imports_of(name, path, modules)
