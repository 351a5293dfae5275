"""An ASGI app served by uvicorn on a thread of the test process, on 127.0.0.1 and a free port.

The handle is kept and stopped when the ``with`` block ends (never a process found by name); the
server's logs reach pytest's (``log_config=None``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from support import free_port


@contextmanager
def serve_app(app: Any, start_timeout: float = 30) -> Iterator[int]:
    """Serve ``app`` for the block; yields the port."""
    import uvicorn

    port = free_port()
    handle = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", log_config=None))
    thread = threading.Thread(target=handle.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout
    while not handle.started:
        assert time.monotonic() < deadline and thread.is_alive(), "server did not start"
        time.sleep(0.05)
    try:
        yield port
    finally:
        handle.should_exit = True
        thread.join(timeout=30)
