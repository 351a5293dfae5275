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
