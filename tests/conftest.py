"""Shared fixtures."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fault_server import FaultServer  # noqa: E402


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
