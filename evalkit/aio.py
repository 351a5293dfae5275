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
import queue
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


class DaemonThreadPool(concurrent.futures.Executor):
    """An executor for user code that may never return (reward functions): its threads are daemons.

    ``concurrent.futures.ThreadPoolExecutor`` joins its threads when the interpreter exits, so one
    reward function stuck in a loop would keep ``prime`` from ever exiting after its rollout timed
    out. These threads die with the process instead. At most ``max_workers`` threads; a thread
    whose call never returns stays taken, and work queues for the others (a caller's timeout, which
    counts the wait in the queue, then fires). Python code holding the GIL still shares it with the
    event loop: threads keep the loop responsive, they do not make CPU-bound scoring parallel.
    """

    def __init__(self, max_workers: int = 64, name: str = "evalkit-worker") -> None:
        self._max_workers = max(1, max_workers)
        self._name = name
        self._work: queue.SimpleQueue[tuple[concurrent.futures.Future[Any], Callable[..., Any], tuple, dict] | None] = (
            queue.SimpleQueue()
        )
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._shutdown = False

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new work after shutdown")
            future: concurrent.futures.Future[T] = concurrent.futures.Future()
            self._work.put((future, fn, args, kwargs))
            if not self._idle.acquire(blocking=False) and len(self._threads) < self._max_workers:
                thread = threading.Thread(target=self._serve, name=f"{self._name}-{len(self._threads)}", daemon=True)
                thread.start()
                self._threads.append(thread)
            return future

    def _serve(self) -> None:
        while True:
            item = self._work.get()
            if item is None:
                return
            future, fn, args, kwargs = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as exc:  # handed to the caller, like ThreadPoolExecutor
                    future.set_exception(exc)
                del future, fn, args, kwargs, item
            self._idle.release()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shutdown = True
            for _ in self._threads:
                self._work.put(None)
        if wait:
            for thread in self._threads:
                thread.join()
