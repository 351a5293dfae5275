"""Shared fixtures."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support import VERIFIERS_ENVS
from support.fault_server import FaultServer
from support.solver_server import SolverServer


@pytest.fixture
def fault_servers() -> Iterator[Callable[..., FaultServer]]:
    """Start fault-injecting servers on 127.0.0.1 (``fault_servers("--faults", "500")``); each is
    stopped, by its own PID, when the test ends."""
    started: list[FaultServer] = []

    def start(*args: str) -> FaultServer:
        started.append(FaultServer(*args))
        return started[-1]

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def verifiers_project(tmp_path: Path) -> Path:
    """A fresh project whose ``environments/`` holds a copy of tests/verifiers_envs (environments written for
    verifiers), with a ``home/`` to point HOME at."""
    import shutil

    envs = VERIFIERS_ENVS
    shutil.copytree(envs, tmp_path / "environments", ignore=shutil.ignore_patterns("README.md", "__pycache__"))
    (tmp_path / "home").mkdir()
    return tmp_path


@pytest.fixture(scope="module")
def solver() -> Iterator[SolverServer]:
    """A model on 127.0.0.1 that answers right (tests/support/solver_server.py), one per test module."""
    server = SolverServer()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight Llama written to a folder (tests/support/tiny_model.py), one per test module."""
    from support.tiny_model import write_tiny_model

    return write_tiny_model(tmp_path_factory.mktemp("tiny") / "model")
