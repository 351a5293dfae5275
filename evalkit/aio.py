"""One asyncio event loop on a background thread, for synchronous code that drives async rollouts.

GEPA's engine calls ``adapter.evaluate`` and the reflection LM synchronously; the RL trainer collects
a batch, runs its baseline and its periodic evals from plain threads. Running each call with
``asyncio.run`` would create and destroy a loop per call, and model clients (aiohttp sessions, the
embedded engine's batching queue) are bound to the loop they were first used on. So every coroutine
of a job goes to this one loop, which lives as long as the job, and the calling thread waits for
the result. Any number of threads may call :meth:`LoopThread.run` at once; their coroutines share
the loop (and so share batches in the embedded engine).

Contract: ``run(coro)`` returns what the coroutine returns or raises what it raises; a
``KeyboardInterrupt`` in the caller cancels the coroutine before propagating. ``close()`` cancels
whatever is still scheduled, stops the loop and joins its thread; call it once the job is done
(or use the object as a context manager). Never call ``run`` from a coroutine on the same loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """A started event loop on a daemon thread; ``run(coro)`` blocks until the coroutine finishes."""

    def __init__(self, name: str = "evalkit-asyncio", initializer: Callable[[], None] | None = None) -> None:
        """``initializer`` runs first on the loop's thread (e.g. per-thread torch settings for code
        that decodes on the loop)."""
        self._loop = asyncio.new_event_loop()
        self._initializer = initializer
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        if self._initializer is not None:  # as the loop's first callback: an error is logged, the loop still runs
            self._loop.call_soon(self._initializer)
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
