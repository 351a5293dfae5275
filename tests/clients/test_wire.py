"""The OpenAI wire module: request parsing, the null-content rule, text deltas that never need taking back,
and the verifiers v1 bridge answering the openai SDK with SSE (stream=True) over real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os

import aiohttp
import pytest
from support.scripted_client import ScriptedClient, tool_call_reply

from evalkit.clients.wire import WireError, assistant_message, completion_body, parse_request
from evalkit.core.types import Completion, SamplingArgs, Usage
from evalkit.model.detokenize import IncrementalText
from evalkit.verifiers_compat.v1.bridge import ModelBridgeServer, bridge_key_var

ADD_TOOL = {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {}}}}


def test_parse_request_splits_the_body_and_names_the_bad_field():
    chat = parse_request({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True,
                          "stream_options": {"include_usage": True}, "max_completion_tokens": 5, "top_logprobs": 2,
                          "temperature": 0, "return_token_ids": True, "tools": [ADD_TOOL], "tool_choice": "auto"})
    assert chat.stream and chat.include_usage and chat.n == 1 and chat.tools == [ADD_TOOL]
    assert chat.sampling == SamplingArgs(max_tokens=5, temperature=0, extra={"return_token_ids": True})
    bad = [({"messages": []}, "messages"), ({"messages": [{"content": "x"}]}, "messages"),
           ({"messages": [{"role": "user", "content": 3}]}, "messages"),
           ({"messages": [{"role": "user", "content": "x"}], "tools": {"a": 1}}, "tools"),
           ({"messages": [{"role": "user", "content": "x"}], "n": 2}, "n"),
           ({"messages": [{"role": "user", "content": "x"}], "model": 7}, "model"),
           ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, None)]
    for body, param in bad:
        with pytest.raises(WireError) as error:
            parse_request(body)
        assert error.value.param == param, body
    assert parse_request({"messages": [{"role": "user", "content": "x"}], "n": 3}, max_choices=4).n == 3


def test_a_tool_call_reply_without_text_has_null_content():
    call = tool_call_reply("add", '{"a": 1}').tool_calls
    assert assistant_message("", call)["content"] is None
    assert assistant_message("Calling.", call)["content"] == "Calling."
    assert assistant_message("", [])["content"] == ""
    body = completion_body(
        Completion("ok", usage=Usage(3, 1), prompt_token_ids=[1, 2, 3], completion_token_ids=[9]), "m"
    )
    assert body["object"] == "chat.completion" and body["prompt_token_ids"] == [1, 2, 3]
    assert body["choices"][0]["token_ids"] == [9] and body["usage"]["total_tokens"] == 4


class ByteTokenizer:
    """Token ids are UTF-8 bytes, so one character can span tokens (as in byte-level BPE)."""

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")


def stream_text(text: str, **options) -> tuple[list[str], IncrementalText]:
    pieces = IncrementalText(ByteTokenizer(), **options)
    return [pieces.push([byte]) for byte in text.encode()], pieces


def test_incremental_text_waits_for_whole_characters_and_possible_stop_strings():
    deltas, pieces = stream_text("héllo wörld")
    assert "".join(deltas) == "héllo wörld" and "\ufffd" not in "".join(deltas)
    assert sum(1 for d in deltas if d) > 5  # real increments
    deltas, pieces = stream_text("the answer is 4. END more", stop=["END"])
    assert "".join(deltas) == "the answer is 4. " and pieces.finish("the answer is 4. ") == ""
    deltas, _ = stream_text("xEN", stop=["END"])
    assert "".join(deltas) == "x"  # "EN" may still become the stop string


def test_incremental_text_holds_a_tool_call_back_until_the_end():
    text = 'Sure.\n<tool_call>{"name": "add"}</tool_call>'
    deltas, pieces = stream_text(text, markers=["<tool_call>"], hold_whitespace=True, skip_ids={300})
    assert "".join(deltas) == "Sure."
    assert pieces.push([300]) == ""  # an id to skip (end of sequence) adds nothing
    assert pieces.finish("Sure.") == "" and pieces.sent == "Sure."
    deltas, pieces = stream_text("plain <tool_c", markers=["<tool_call>"])
    assert "".join(deltas) == "plain " and pieces.finish("plain <tool_c") == "<tool_c"


# ----- the bridge over the openai SDK ----------------------------------------------------------

def sdk(bridge: ModelBridgeServer):
    """An SDK client for the bridge; use it in ``async with`` so it closes on the test's own loop."""
    from openai import AsyncOpenAI

    return AsyncOpenAI(base_url=bridge.base_url, api_key=os.environ[bridge_key_var()], max_retries=0)


async def streamed(client, **kwargs):
    """(the assembled completion, the raw chunks) of one streamed request."""
    from openai.lib.streaming.chat import ChatCompletionStreamState

    state, chunks = ChatCompletionStreamState(), []
    stream = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True,
                                                  **kwargs)
    async for chunk in stream:
        chunks.append(chunk)
        state.handle_chunk(chunk)
    return state.current_completion_snapshot, chunks


async def test_bridge_streams_text_and_the_usage_chunk_when_asked():
    reply = Completion("hello there", usage=Usage(4, 2), prompt_token_ids=[1, 2], completion_token_ids=[7, 8])
    async with ModelBridgeServer(ScriptedClient([reply])) as bridge, sdk(bridge) as client:
        plain = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        final, chunks = await streamed(client, stream_options={"include_usage": True})
        _, without = await streamed(client)
    assert final.choices[0].message.content == plain.choices[0].message.content == "hello there"
    assert final.choices[0].finish_reason == "stop" and chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices == [] and chunks[-1].usage.prompt_tokens == 4 and chunks[-1].usage.completion_tokens == 2
    assert all(chunk.usage is None for chunk in without) and all(
        chunk.object == "chat.completion.chunk" for chunk in without
    )
    assert [t for c in chunks if c.choices for t in (c.choices[0].model_extra or {}).get("token_ids") or []] == [7, 8]


async def test_bridge_answers_a_tool_call_as_vllm_does_null_content_whole_empty_content_streamed():
    reply = tool_call_reply("add", '{"a": 2, "b": 3}', call_id="call_7")
    async with ModelBridgeServer(ScriptedClient([reply])) as bridge, sdk(bridge) as client:
        plain = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], tools=[ADD_TOOL]
        )
        final, chunks = await streamed(client, tools=[ADD_TOOL])
    # vLLM: `null` in a whole reply; a stream opens with `content: ""`, so the assembled message holds "" and a
    # chat program sends "" back in its next request, as it does against vLLM
    assert plain.choices[0].message.content is None and final.choices[0].message.content == ""
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content == ""
    for message in (plain.choices[0].message, final.choices[0].message):
        (call,) = message.tool_calls
        assert (call.id, call.function.name, json.loads(call.function.arguments)) == ("call_7", "add", {"a": 2, "b": 3})
    assert final.choices[0].finish_reason == "tool_calls"
    deltas = [c.choices[0].delta.tool_calls for c in chunks if c.choices and c.choices[0].delta.tool_calls]
    assert len(deltas) == 2 and deltas[0][0].function.name == "add" and deltas[1][0].id is None


async def test_bridge_stream_is_sse_ending_with_done():
    async with ModelBridgeServer(ScriptedClient(["ok"])) as bridge, aiohttp.ClientSession() as http:
        headers = {"Authorization": f"Bearer {os.environ[bridge_key_var()]}"}
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
        async with http.post(f"{bridge.base_url}/chat/completions", json=body, headers=headers) as response:
            assert response.headers["Content-Type"].startswith("text/event-stream")
            raw = await response.read()
    events = raw.split(b"\n\n")
    assert events[-1] == b"" and events[-2] == b"data: [DONE]"
    assert all(event.startswith(b"data: {") for event in events[:-2])


class HangingClient:
    """A model call that never returns, and says when it was cancelled."""

    model = "m"

    def __init__(self):
        self.started, self.cancelled = asyncio.Event(), asyncio.Event()

    async def chat(self, messages, sampling, tools=None):  # noqa: ANN001, ANN201
        self.started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


async def test_a_client_that_hangs_up_cancels_the_bridges_model_call(caplog):
    client = HangingClient()
    with caplog.at_level(logging.WARNING):
        async with ModelBridgeServer(client) as bridge, sdk(bridge) as caller:
            asking = asyncio.ensure_future(streamed(caller))
            await asyncio.wait_for(client.started.wait(), 30)
            asking.cancel()  # closes the connection
            await asyncio.wait_for(client.cancelled.wait(), 30)
            assert bridge.take({None}) == []
        gc.collect()
        await asyncio.sleep(0)
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage() or r.levelno >= logging.ERROR]
