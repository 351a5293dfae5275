"""The import graph of the shipped packages, read with ``ast`` (imports inside functions included):
no cycle, and no import against the layer order.

Layers, top to bottom: ``primekit_cli`` (the app) -> ``gepa_cli`` and ``rl_backend`` (side by side, neither
imports the other) -> ``evalkit``. Inside evalkit the subpackages are layered too (:data:`EVALKIT_ORDER`, bottom
first): a module imports only its own subpackage and those of lower layers, never one beside it on the same layer;
a subpackage in no layer fails the test until it is given one. An edge goes to the most specific module an import
names (``from evalkit.clients import redact`` -> ``evalkit.core.redact``), as import-linter counts them;
``if TYPE_CHECKING:`` imports count too (they are still a dependency).
"""

from __future__ import annotations

import ast
from pathlib import Path

from support import REPO

ROOT = REPO
PACKAGES = ("primekit_cli", "gepa_cli", "rl_backend", "evalkit")
RANK = {"primekit_cli": 2, "gepa_cli": 1, "rl_backend": 1, "evalkit": 0}
LAYERS = "primekit_cli -> gepa_cli, rl_backend -> evalkit"
EVALKIT_ORDER: tuple[tuple[str, ...], ...] = (
    ("core", "templates"),  # the bottom layer (errors, redaction, run dirs, file I/O), and template files
    ("model",),  # the embedded engine
    ("clients",),  # the one client layer, built on the engine
    ("envs", "vocabulary", "serving", "sandbox"),  # the environment API, shared config fields, `prime serve`, bwrap
    ("verifiers_compat", "builtin"),  # environments written for verifiers, the built-in environments
    ("loading",),  # finding and loading an environment (native, built-in or verifiers)
    ("eval",),  # the runner
    ("report", "envcheck"),  # what reads the runner's results, and `prime env check`
    ("",),  # evalkit itself: its public API names any of the above (loaded lazily, by name)
)
"""evalkit's subpackages, bottom layer first."""
EVALKIT_LAYERS = " < ".join(", ".join(name or "evalkit" for name in layer) for layer in EVALKIT_ORDER)


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


def evalkit_layer(module: str) -> tuple[str, int | None]:
    """The evalkit subpackage ``module`` belongs to (``""``: evalkit itself) and its layer (None: in no layer)."""
    parts = module.split(".")
    name = parts[1] if len(parts) > 1 else ""
    return name, next((rank for rank, layer in enumerate(EVALKIT_ORDER) if name in layer), None)


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for source, targets in sorted(graph.items()):
        top = source.split(".")[0]
        for target in sorted(targets):
            other = target.split(".")[0]
            if RANK[other] > RANK[top] or (RANK[other] == RANK[top] and other != top):
                bad.append(f"{source} -> {target} (against {LAYERS})")
            elif top == other == "evalkit":
                (name, rank), (target_name, target_rank) = evalkit_layer(source), evalkit_layer(target)
                if rank is None or target_rank is None:
                    missing = name if rank is None else target_name
                    bad.append(f"{source} -> {target} (evalkit.{missing} is in no layer of EVALKIT_ORDER: add it)")
                elif target_rank > rank or (target_rank == rank and target_name != name):
                    bad.append(f"{source} -> {target} (against evalkit's layers {EVALKIT_LAYERS})")
    return bad


def test_every_evalkit_subpackage_has_a_layer():
    names = {evalkit_layer(module)[0] for module in module_files() if module.split(".")[0] == "evalkit"}
    assert sorted(name for name in names if evalkit_layer(f"evalkit.{name}")[1] is None) == []
    assert sorted(name for layer in EVALKIT_ORDER for name in layer if name not in names) == []


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
    assert layer_violations({"evalkit.core.errors": {"evalkit.core.redact", "evalkit.clients.spec"},
                             "evalkit.x": {"gepa_cli.runner"},
                             "gepa_cli.a": {"rl_backend.b"}, "primekit_cli.a": {"evalkit.core.errors"},
                             "evalkit.model.registry": {"evalkit.clients.spec"},
                             "evalkit.verifiers_compat.v1.env": {"evalkit.loading.resolve", "evalkit.envs.base"},
                             "evalkit.serving.app": {"evalkit.envs.base", "evalkit.clients.wire"},
                             "evalkit.report.html": {"evalkit.envcheck.run", "evalkit.eval.results", "evalkit.core"},
                             "evalkit.newpkg.a": {"evalkit.core.errors"}, "evalkit.eval.runner": {"evalkit"}}) == [
        "evalkit.core.errors -> evalkit.clients.spec (against evalkit's layers " + EVALKIT_LAYERS + ")",
        "evalkit.eval.runner -> evalkit (against evalkit's layers " + EVALKIT_LAYERS + ")",
        "evalkit.model.registry -> evalkit.clients.spec (against evalkit's layers " + EVALKIT_LAYERS + ")",
        "evalkit.newpkg.a -> evalkit.core.errors (evalkit.newpkg is in no layer of EVALKIT_ORDER: add it)",
        "evalkit.report.html -> evalkit.envcheck.run (against evalkit's layers " + EVALKIT_LAYERS + ")",
        "evalkit.serving.app -> evalkit.envs.base (against evalkit's layers " + EVALKIT_LAYERS + ")",
        "evalkit.verifiers_compat.v1.env -> evalkit.loading.resolve (against evalkit's layers " + EVALKIT_LAYERS + ")",
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
