"""`prime serve`: the OpenAI-compatible server answers the openai SDK, streamed or not; bad requests are 400s.

The server runs uvicorn on a thread of this process (its handle is kept and stopped here), over
the same shared fp32 engine the engine tests use; its logs reach pytest's (``log_config=None``).
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import socket
import time
import urllib.request

import pytest
from support.app_thread import serve_app
from typer.testing import CliRunner

from primekit_cli.app import app as cli


@pytest.fixture(scope="module")
def server():
    from evalkit.model.shared import get_engine
    from evalkit.serving.app import build_app

    engine = get_engine("local/smollm2-135m", dtype="fp32", max_batch=8, device="cpu")
    with serve_app(build_app(engine)) as port:
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
async def client(server):
    """Closed on the test's own loop: left open, its connection pool's tasks die with that loop and are
    logged ("Task exception was never retrieved") during whichever test the collector next runs in."""
    from openai import AsyncOpenAI

    async with AsyncOpenAI(base_url=f"{server}/v1", api_key="x", max_retries=0) as opened:
        yield opened


@pytest.mark.slow
async def test_models_and_health(server, client):
    models = await client.models.list()
    assert [m.id for m in models.data] == ["local/smollm2-135m"]
    with urllib.request.urlopen(f"{server}/health", timeout=10) as health:
        assert health.status == 200 and json.loads(health.read())["status"] == "ok"


@pytest.mark.slow
async def test_chat_completion_with_logprobs_and_token_ids(client):
    response = await client.chat.completions.create(
        model="local/smollm2-135m",
        messages=[{"role": "user", "content": "What is 2 + 2?"}],
        max_tokens=8,
        temperature=0,
        logprobs=True,
    )
    choice = response.choices[0]
    extra = response.model_dump()
    token_ids = extra["choices"][0]["token_ids"]
    assert choice.message.role == "assistant" and choice.message.content
    assert choice.finish_reason in ("stop", "length") and 1 <= len(token_ids) <= 8
    assert len(choice.logprobs.content) == len(token_ids) and all(t.logprob <= 0 for t in choice.logprobs.content)
    assert response.usage.completion_tokens == len(token_ids)
    assert response.usage.prompt_tokens == len(extra["prompt_token_ids"]) > 0


@pytest.mark.slow
async def test_bad_requests_are_400_and_the_server_keeps_serving(client):
    import openai

    with pytest.raises(openai.BadRequestError) as bad:
        await client.chat.completions.create(
            model="local/smollm2-135m", messages=[{"role": "user", "content": "hi"}], max_tokens=0
        )
    assert bad.value.status_code == 400 and "max_tokens" in bad.value.message
    assert bad.value.body["type"] == "invalid_request_error"
    with pytest.raises(openai.BadRequestError, match="not served here"):
        await client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}], max_tokens=4)
    with pytest.raises(openai.BadRequestError, match="context window"):
        await client.chat.completions.create(
            model="local/smollm2-135m", messages=[{"role": "user", "content": "hello " * 9000}], max_tokens=4
        )
    ok = await client.chat.completions.create(
        model="smollm2-135m", messages=[{"role": "user", "content": "Say hi."}], max_tokens=4, temperature=0
    )
    assert ok.choices[0].message.content is not None


@pytest.mark.slow
async def test_n_choices_and_seed(client):
    response = await client.chat.completions.create(
        model="local/smollm2-135m", messages=[{"role": "user", "content": "Name a fruit."}],
        max_tokens=6, temperature=1.0, seed=5, n=2,
    )
    again = await client.chat.completions.create(
        model="local/smollm2-135m", messages=[{"role": "user", "content": "Name a fruit."}],
        max_tokens=6, temperature=1.0, seed=5,
    )
    assert len(response.choices) == 2 and response.choices[0].message.content == again.choices[0].message.content


async def _streamed(client, **kwargs):
    """(the assembled completion, the chunks) of one streamed request."""
    from openai.lib.streaming.chat import ChatCompletionStreamState

    state, chunks = ChatCompletionStreamState(), []
    async for chunk in await client.chat.completions.create(model="local/smollm2-135m", stream=True, **kwargs):
        chunks.append(chunk)
        state.handle_chunk(chunk)
    return state.current_completion_snapshot, chunks


@pytest.mark.slow
async def test_streamed_deltas_are_the_answer_as_it_is_generated(client):
    ask = {"messages": [{"role": "user", "content": "What is 2 + 2? Answer in a sentence."}], "max_tokens": 12,
           "temperature": 0, "logprobs": True}
    whole = (await client.chat.completions.create(model="local/smollm2-135m", **ask)).model_dump()
    final, chunks = await _streamed(client, stream_options={"include_usage": True}, **ask)
    deltas = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert "".join(deltas) == final.choices[0].message.content == whole["choices"][0]["message"]["content"]
    assert len(deltas) > 3  # token by token, not one chunk at the end
    assert final.choices[0].finish_reason == whole["choices"][0]["finish_reason"]
    token_ids = [t for c in chunks if c.choices for t in (c.choices[0].model_extra or {}).get("token_ids") or []]
    assert token_ids == whole["choices"][0]["token_ids"] and len(final.choices[0].logprobs.content) == len(token_ids)
    assert chunks[0].model_extra["prompt_token_ids"] == whole["prompt_token_ids"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == len(token_ids)
    _, plain = await _streamed(client, **ask)
    assert all(chunk.usage is None for chunk in plain)  # no usage chunk unless asked


def _add_call(a: int, b: int, i: int) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": "add", "arguments": json.dumps({"a": a, "b": b})}}]}


@pytest.mark.slow
async def test_a_streamed_tool_call_reassembles(client):
    tools = [{"type": "function", "function": {"name": "add", "description": "Add two numbers", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}]
    messages = []  # a few calls before, so the greedy 135M model writes one too
    for i, (a, b) in enumerate([(1, 2), (4, 5), (7, 1)]):
        messages += [{"role": "user", "content": f"Add {a} and {b}."}, _add_call(a, b, i)]
    ask = {"messages": messages + [{"role": "user", "content": "Add 3 and 6."}], "tools": tools, "max_tokens": 40,
           "temperature": 0}
    whole = await client.chat.completions.create(model="local/smollm2-135m", **ask)
    final, chunks = await _streamed(client, **ask)
    # as vLLM: content null in the whole reply, "" assembled from a stream (its first delta carries content "")
    assert whole.choices[0].message.content is None and final.choices[0].message.content == ""
    for choice in (whole.choices[0], final.choices[0]):
        assert choice.finish_reason == "tool_calls"
        (call,) = choice.message.tool_calls
        assert call.function.name == "add" and json.loads(call.function.arguments) == {"a": 3, "b": 6}
    assert not [c for c in chunks if c.choices and c.choices[0].delta.content]  # the markup is not content


@pytest.mark.timing
@pytest.mark.slow
async def test_a_stream_ends_with_done_and_a_client_that_leaves_cancels_it(server, client, caplog):
    import aiohttp

    body = {"model": "local/smollm2-135m", "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 3,
            "stream": True}
    async with aiohttp.ClientSession() as http, http.post(f"{server}/v1/chat/completions", json=body) as response:
        events = (await response.read()).split(b"\n\n")
    assert events[-2:] == [b"data: [DONE]", b""] and all(e.startswith(b"data: {") for e in events[:-2])
    long = {"messages": [{"role": "user", "content": "Tell me a very long story."}], "max_tokens": 8000,
            "temperature": 0, "extra_body": {"ignore_eos": True}}
    with caplog.at_level(logging.WARNING):
        stream = await client.chat.completions.create(model="local/smollm2-135m", stream=True, **long)
        received = []
        async for chunk in stream:
            received.append(chunk)
            if len(received) == 4:
                break
        await stream.close()
        deadline = time.monotonic() + 120
        while _load(server)["requests_running"] or _load(server)["requests_waiting"]:
            assert time.monotonic() < deadline, "the abandoned stream is still generating"
            await asyncio.sleep(0.2)
        gc.collect()
    assert len(received) == 4
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage() or r.levelno >= logging.ERROR]


def _load(server: str) -> dict:
    with urllib.request.urlopen(f"{server}/health", timeout=10) as health:
        return json.loads(health.read())


def test_serve_refuses_a_taken_port_and_bad_flags():
    runner = CliRunner()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = runner.invoke(cli, ["serve", "--port", str(port)])
    assert result.exit_code == 2 and "pass another --port" in result.output
    result = runner.invoke(cli, ["serve", "--model", "local/nope"])
    assert result.exit_code == 2 and "known: local/smollm2-135m" in result.output
    result = runner.invoke(cli, ["serve", "--dtype", "int8"])
    assert result.exit_code == 2 and "bf16, fp32 or q4" in result.output
    result = runner.invoke(cli, ["serve", "--device", "tpu"])
    assert result.exit_code == 2 and "auto, cpu, cuda or cuda:N" in result.output
    result = runner.invoke(cli, ["serve", "--api-key", " "])
    assert result.exit_code == 2 and "--api-key is empty" in result.output
