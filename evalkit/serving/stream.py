"""``prime serve``'s answer to ``stream: true``: the engine's tokens as SSE chunks while they are sampled.

The engine tells each sequence's listener every increment of tokens on its worker thread (one token a
step on CPU, a window of steps on CUDA); :class:`EngineStream` carries them onto the event loop and
writes one chunk per increment (its ``token_ids``, its logprobs when asked, and the text that became
safe to send, see :mod:`evalkit.model.detokenize`). When a choice finishes, the rest of its text, its
tool calls (parsed from the whole text, as the non-streamed answer does) and its finish reason follow;
then the usage chunk when ``stream_options.include_usage`` is set, and ``[DONE]``. The deltas of a
choice concatenate to the non-streamed answer's content (a reply with text and tool calls may differ in
leading whitespace, which the non-streamed answer strips once it knows a call follows).

A client that disconnects ends the stream: its sequences are cancelled, and the engine drops them at
its next step. Nothing here wraps the engine's futures in asyncio futures, so a sequence that fails
after its client left logs nothing. A failure after the stream began (the server is stopping) is sent
as an ``error`` event.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from evalkit.clients.wire import SSE_DONE, ChatRequest, ChunkWriter, error_event, logprob_entry
from evalkit.core.types import Usage
from evalkit.model.chat_format import TOOL_CALL_OPEN, parse_tool_calls
from evalkit.model.detokenize import IncrementalText

if TYPE_CHECKING:
    from starlette.requests import Request

    from evalkit.model.engine import Engine
    from evalkit.model.requests import GenerationResult
    from evalkit.model.scheduler import TokenListener

_GONE = (-1, None, None)


def token_logprobs(tokenizer: Any, token_ids: list[int], logprobs: list[float]) -> list[dict[str, Any]]:
    """The ``logprobs.content`` entries of these tokens."""
    return [logprob_entry(tokenizer.decode([token_id]), logprob) for token_id, logprob in zip(token_ids, logprobs)]


class EngineStream:
    """One streamed answer: build it, pass :meth:`listener` to the submissions, :meth:`begin` with their
    futures, then send :meth:`events` (see the module docstring)."""

    def __init__(self, engine: Engine, chat: ChatRequest, model: str):
        self.engine = engine
        self.chat = chat
        self.writer = ChunkWriter(model, include_usage=chat.include_usage)
        self.prompt_ids: list[int] = []
        self.futures: list[concurrent.futures.Future] = []
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[tuple[int, Any, Any]] = asyncio.Queue()
        eos = () if chat.sampling.extra.get("ignore_eos") else engine.stop_token_ids
        tools = bool(chat.tools)
        self._texts = [
            IncrementalText(engine.tokenizer, stop=chat.sampling.stop or (), markers=(TOOL_CALL_OPEN,) if tools else (),
                            hold_whitespace=tools, skip_ids=eos)
            for _ in range(chat.n)
        ]

    def listener(self, index: int) -> TokenListener:
        """The engine-side listener of choice ``index`` (called on the worker thread)."""
        def on_tokens(token_ids: list[int], logprobs: list[float]) -> None:
            self._post((index, token_ids, logprobs))

        return on_tokens

    def begin(self, prompt_ids: list[int], futures: list[concurrent.futures.Future]) -> None:
        self.prompt_ids = prompt_ids
        self.futures = futures
        for index, future in enumerate(futures):
            future.add_done_callback(_on_done(self._post, index))

    def _post(self, item: tuple[int, Any, Any]) -> None:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:  # the event loop has ended (the server stopped); nobody is listening
            pass

    async def events(self, request: Request) -> AsyncIterator[bytes]:
        """The SSE events, until ``[DONE]`` or until the client disconnects."""
        watcher = asyncio.ensure_future(self._watch(request))
        try:
            for index in range(self.chat.n):
                yield self.writer.start(index, self.prompt_ids if index == 0 else None)
            results: list[GenerationResult] = []
            while len(results) < self.chat.n:
                index, token_ids, payload = await self._queue.get()
                if index < 0:
                    return  # the client left
                if token_ids is not None:
                    yield self._increment(index, token_ids, payload)
                    continue
                failure = _failure(payload)
                if failure is not None:
                    yield error_event(failure)
                    yield SSE_DONE
                    return
                results.append(payload.result())
                for event in self._ending(index, results[-1]):
                    yield event
            usage = self.writer.usage(Usage(len(self.prompt_ids), sum(len(r.token_ids) for r in results)))
            if usage is not None:
                yield usage
            yield SSE_DONE
        finally:
            watcher.cancel()
            for future in self.futures:
                future.cancel()  # the engine drops cancelled sequences at its next step

    def _increment(self, index: int, token_ids: list[int], logprobs: list[float]) -> bytes:
        entries = token_logprobs(self.engine.tokenizer, token_ids, logprobs) if self.chat.sampling.logprobs else None
        return self.writer.content(index, self._texts[index].push(token_ids), token_ids=token_ids, logprobs=entries)

    def _ending(self, index: int, result: GenerationResult) -> list[bytes]:
        content, calls = parse_tool_calls(result.text) if self.chat.tools else (result.text, [])
        rest = self._texts[index].finish(content)
        events = [self.writer.content(index, rest)] if rest else []
        return events + self.writer.end(index, calls, "tool_calls" if calls else result.finish_reason)

    async def _watch(self, request: Request) -> None:
        await until_disconnected(request)
        self._queue.put_nowait(_GONE)


async def until_disconnected(request: Request) -> None:
    """Returns when the client closes the connection (the body has been read by then)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _on_done(post: Callable[[tuple[int, Any, Any]], None], index: int) -> Callable[[concurrent.futures.Future], None]:
    return lambda future: post((index, None, future))


def _failure(future: concurrent.futures.Future) -> str | None:
    """Why a finished sequence has no result (``None`` when it has one)."""
    if future.cancelled():
        return "the request was cancelled"
    error = future.exception()
    return None if error is None else (str(error) or type(error).__name__)
