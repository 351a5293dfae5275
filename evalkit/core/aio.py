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
import functools
import inspect
import queue
import threading
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
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

    def __enter__(self) -> LoopThread:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class DaemonThreadPool(concurrent.futures.Executor):
    """An executor for user code that may never return (reward functions): its threads are daemons.

    ``concurrent.futures.ThreadPoolExecutor`` joins its threads when the interpreter exits, so one
    reward function stuck in a loop would keep ``prime`` from ever exiting after its rollout timed
    out. These threads die with the process instead.

    Capacity: at most ``max_workers`` threads serve work at once; more work queues. A call its caller
    gave up on while it runs (:meth:`call` cancelled, e.g. by a timeout) is *abandoned*: Python cannot
    stop its thread, so that thread finishes the call and exits, and it no longer counts against
    ``max_workers``: a new thread takes the queued work. So stuck calls never starve healthy ones;
    each stuck call costs one idle thread until it returns. Python code holding the GIL still shares
    it with the event loop: threads keep the loop responsive, they do not make CPU-bound scoring parallel.
    """

    def __init__(self, max_workers: int = 64, name: str = "evalkit-worker") -> None:
        self._max_workers = max(1, max_workers)
        self._name = name
        self._work: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._serving = 0  # threads counted against max_workers (started, not abandoned)
        self._abandoned: set[concurrent.futures.Future[Any]] = set()
        self._shutdown = False

    @property
    def abandoned(self) -> int:
        """Calls given up on that are still running on their threads."""
        return len(self._abandoned)

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
        return self._submit(None, fn, args, kwargs)

    def _submit(self, on_start: Callable[[], None] | None, fn: Callable[..., T], args: tuple, kwargs: dict
                ) -> concurrent.futures.Future[T]:
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new work after shutdown")
            future: concurrent.futures.Future[T] = concurrent.futures.Future()
            self._work.put(_Work(future, fn, args, kwargs, on_start))
            if not self._idle.acquire(blocking=False) and self._serving < self._max_workers:
                self._start_thread()
            return future

    def _start_thread(self) -> None:
        """Start one more serving thread (the caller holds the lock)."""
        thread = threading.Thread(target=self._serve, name=f"{self._name}-{len(self._threads)}", daemon=True)
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        self._serving += 1
        thread.start()

    async def call(self, fn: Callable[..., T], *args: Any, on_start: Callable[[], None] | None = None) -> T:
        """``fn(*args)`` on a pool thread, awaited. ``on_start`` runs on the caller's event loop when a
        thread picks the call up (the time before was spent queued). Cancelling the await (a timeout)
        abandons a running call (see the class docstring) and drops a queued one."""
        loop = asyncio.get_running_loop()
        started = (lambda: loop.call_soon_threadsafe(on_start)) if on_start is not None else None
        future = self._submit(started, fn, args, {})
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            self.abandon(future)
            raise

    def abandon(self, future: concurrent.futures.Future[Any]) -> None:
        """Stop counting the thread running ``future`` against ``max_workers``; start one for queued work."""
        with self._lock:
            if not future.running() or future in self._abandoned:
                return  # queued (cancelling it suffices) or already finished
            self._abandoned.add(future)
            self._serving -= 1
            if not self._shutdown and not self._work.empty() and self._serving < self._max_workers:
                self._start_thread()

    def _serve(self) -> None:
        while True:
            work = self._work.get()
            if work is None:
                return
            if work.future.set_running_or_notify_cancel():
                if work.on_start is not None:
                    work.on_start()
                try:
                    result, error = work.fn(*work.args, **work.kwargs), None
                except BaseException as exc:  # handed to the caller, like ThreadPoolExecutor
                    result, error = None, exc
                with self._lock:  # settled under the lock, so abandon() sees running or done, never between
                    abandoned = work.future in self._abandoned
                    self._abandoned.discard(work.future)
                    if error is not None:
                        work.future.set_exception(error)
                    else:
                        work.future.set_result(result)
                del work, result, error
                if abandoned:
                    return  # the pool already started a thread in this one's place
            self._idle.release()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shutdown = True
            threads = [t for t in self._threads if t.is_alive()]
            for _ in threads:
                self._work.put(None)
        if wait:
            for thread in threads:
                thread.join()


USER_EXITS = (SystemExit, KeyboardInterrupt)
"""What user code may raise that is not an ``Exception``: ``sys.exit()`` and a ``KeyboardInterrupt`` of its own."""


class ExitRequested(Exception):
    """User code (a reward function, a tool, an environment hook) called ``sys.exit()`` or raised
    ``KeyboardInterrupt`` itself: an error of that rollout like any other exception, never the end of the run.

    A real Ctrl-C never arrives this way: the signal is delivered to the main thread, where asyncio's handler
    cancels the run's main task (and ``LoopThread.run``'s caller cancels its coroutine), so user code on a worker
    thread or the loop only ever sees a ``KeyboardInterrupt`` it raised itself."""

    @classmethod
    def of(cls, exc: BaseException) -> ExitRequested:
        if isinstance(exc, SystemExit):
            return cls(f"sys.exit({exc.code!r}) called (user code may not end the run)")
        return cls(f"{type(exc).__name__} raised (user code may not end the run)")


async def call_user_code(pool: DaemonThreadPool, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)`` for user code (reward functions, ``env_response``, tools): a coroutine
    function is awaited on the loop; a sync one runs on ``pool`` (so a slow or hung one holds up only
    its own rollout, and a timeout can abandon it); an awaitable a sync function returns is awaited on
    the loop, where its resources live. ``sys.exit()`` or a ``KeyboardInterrupt`` in it is raised as
    :class:`ExitRequested`, which the callers' ``except Exception`` records like any other error."""
    try:
        if is_async_callable(func):
            return await func(*args, **kwargs)
        value = await pool.call(functools.partial(func, *args, **kwargs))
        return await value if inspect.isawaitable(value) else value
    except USER_EXITS as exc:
        raise ExitRequested.of(exc) from None


def is_async_callable(func: Any) -> bool:
    """A coroutine function, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(getattr(func, "__call__", None))


@dataclass
class _Work:
    future: concurrent.futures.Future[Any]
    fn: Callable[..., Any]
    args: tuple
    kwargs: dict
    on_start: Callable[[], None] | None


class Slots:
    """A FIFO bound on concurrent work (``async with slots:``), like ``asyncio.Semaphore(n)`` but O(1).

    Why not ``asyncio.Semaphore``: in Python 3.11 every release scans the waiter queue past the waiters
    already woken but not yet resumed, and an eval queues every rollout of the run on the bound at once;
    at thousands of rollouts per second that scan cost as much CPU as the rollouts' HTTP requests. Here a
    release hands its slot straight to the oldest waiter (so no newcomer can overtake it). A waiter
    cancelled before it resumed gives back the slot it was handed. Use from one event loop.
    """

    def __init__(self, n: int):
        self._free = max(1, int(n))
        self._waiters: deque[asyncio.Future[None]] = deque()

    def locked(self) -> bool:
        """Whether an ``async with`` would wait."""
        return self._free == 0

    async def acquire(self) -> None:
        if self._free > 0:  # then no waiter is live: release() hands slots to live waiters first
            self._free -= 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed a slot, then cancelled before it could use it
            raise  # a cancelled waiter left in the queue is skipped by release()

    def release(self) -> None:
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()
