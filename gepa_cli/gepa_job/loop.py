"""One asyncio event loop on a background thread, for a synchronous caller (the gepa engine).

The engine calls ``adapter.evaluate`` and the reflection LM synchronously. Running each call with
``asyncio.run`` would create and destroy a loop per call, and model clients (aiohttp sessions, the
embedded engine's batching queue) are bound to the loop they were first used on. So every coroutine
of a job goes to this one long-lived loop, and the engine's thread waits for the result.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """A started event loop on a daemon thread; ``run(coro)`` blocks until the coroutine finishes."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="gepa-asyncio", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop; a KeyboardInterrupt in the caller cancels it before propagating."""
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except (KeyboardInterrupt, SystemExit):
            future.cancel()
            try:
                future.result(timeout=5)
            except (concurrent.futures.CancelledError, concurrent.futures.TimeoutError, Exception):
                pass
            raise

    def close(self) -> None:
        """Cancel what is left, stop the loop and join the thread (idempotent)."""
        if self._loop.is_closed():
            return

        async def _cancel_rest() -> None:
            current = asyncio.current_task()
            rest = [t for t in asyncio.all_tasks() if t is not current]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(_cancel_rest(), self._loop).result(timeout=10)
        except Exception:
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> "LoopThread":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
