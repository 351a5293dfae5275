"""The test tree stays as the docs describe it: one folder per area of the code, helpers only in tests/support/.

- Every ``tests/...`` path that the docs (README.md, docs/*.md, bench/README.md), the Makefile, ``.ci/run``,
  pyproject.toml or a test's own text names exists: a moved test takes its mentions along.
- No test imports another test file: what tests share lives in tests/support/.
- Test modules are imported by their file name (the areas have no ``__init__.py``), so two areas cannot both hold a
  ``test_x.py``; and an area folder never takes the name of a package the code imports but may lack: ``tests/`` is
  on ``sys.path``, so an area named ``verifiers`` would pass for verifiers where the extra is not installed.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

from support import REPO, TESTS

from evalkit.core.tomlio import load_toml

NAMING = ("README.md", "bench/README.md", "docs/*.md", "Makefile", ".ci/run", "pyproject.toml", "tests/**/*.py",
          "tests/**/README.md")
"""The files whose ``tests/...`` paths must exist (globs from the repository root)."""
TESTS_PATH = re.compile(r"(?<![\w/.-])tests/[\w./-]*[\w/]")
"""A path under tests/ as prose and code write it (trailing punctuation left out)."""
DATA_FOLDERS = ("support", "verifiers_envs", "envcheck_envs", "golden", "__pycache__")
"""Folders under tests/ that hold no area's tests."""
SHIPPED = ("evalkit", "gepa_cli", "rl_backend", "primekit_cli")


def area_test_files() -> list[Path]:
    """The test modules of the areas (not the environments the tests load as data)."""
    return sorted(p for p in TESTS.rglob("test_*.py") if not set(p.relative_to(TESTS).parts) & set(DATA_FOLDERS))


def named_paths() -> list[tuple[str, str]]:
    """``(where, path)`` for every ``tests/...`` path the naming files hold."""
    found = []
    for pattern in NAMING:
        for file in sorted(REPO.glob(pattern)):
            if "__pycache__" in file.parts:
                continue
            for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
                found += [(f"{file.relative_to(REPO)}:{number}", m.group(0)) for m in TESTS_PATH.finditer(line)]
    return found


def test_every_tests_path_the_docs_name_exists():
    named = named_paths()
    assert any(path.endswith(".py") for _, path in named)  # the scan sees the paths it is for
    missing = [f"{where}: {path}" for where, path in named if not (REPO / path).exists()]
    assert not missing, "paths under tests/ that do not exist (moved? fix the mention):\n" + "\n".join(missing)


def test_no_test_imports_another_test_file():
    """Scripts a test writes for a child process count too: they are text, so the check reads text."""
    importing = re.compile(r"^\s*(from|import)\s+test_\w*", re.MULTILINE)
    found = [f"{p.relative_to(REPO)}: {m.group(0).strip()}" for p in [*area_test_files(), *TESTS.glob("support/*.py")]
             for m in importing.finditer(p.read_text(encoding="utf-8"))]
    assert not found, "move what tests share into tests/support/:\n" + "\n".join(found)


def test_test_file_names_are_unique_across_areas():
    names = Counter(p.name for p in area_test_files())
    twice = sorted(name for name, count in names.items() if count > 1)
    assert not twice, f"test files are imported by name (no __init__.py in the areas); rename one of each: {twice}"


def test_no_area_folder_shadows_a_package_the_code_may_import_without_having():
    """A package the code imports that is not a required dependency (an extra, or absent) must not name an area:
    where it is not installed, ``import name`` would find the tests folder instead (a namespace package)."""
    required = {re.split(r"[<>=!~;\[ ]", dep, maxsplit=1)[0].lower().replace("-", "_")
                for dep in load_toml(REPO / "pyproject.toml")["project"]["dependencies"]}
    imported: set[str] = set()
    for package in SHIPPED:
        for path in (REPO / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    imported |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    imported.add(node.module.split(".")[0])
    areas = {p.name for p in TESTS.iterdir() if p.is_dir() and p.name not in DATA_FOLDERS}
    assert "verifiers" in imported  # the scan sees the imports it is for
    shadowing = sorted(areas & (imported | set(SHIPPED)) - required)
    assert not shadowing, f"rename these area folders (tests/<name>/ would pass for the package): {shadowing}"
