"""What the tests share: fake servers, a scripted client, tiny models, report fixtures, and the paths below."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
"""The tests folder."""
REPO = TESTS.parent
"""The repository root."""
VERIFIERS_ENVS = TESTS / "verifiers_envs"
"""Environments written for verifiers, used as test data."""


def with_pythonpath(*first: Path | str, env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's environment) with ``first`` put ahead of its ``PYTHONPATH``.

    Prepended, not replaced: where packages come from ``PYTHONPATH`` (a GPU machine's ``--target`` install), a child
    given only the repository cannot import them.
    """
    import os

    base = dict(os.environ if env is None else env)
    base["PYTHONPATH"] = os.pathsep.join([*map(str, first), *filter(None, [base.get("PYTHONPATH")])])
    return base


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the OS picks it; a server started next takes it)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def bench_module(path: Path):
    """The bench script at ``path`` (under ``bench/``, which is not a package) imported as a module, for tests of its
    pieces; registered in ``sys.modules`` because its dataclasses look their module up there."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}_under_test", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
