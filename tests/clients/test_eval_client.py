"""The OpenAI-compatible client against a real local HTTP server that injects faults."""

from __future__ import annotations

import asyncio
import time

import pytest
from support import free_port
from support.fault_server import FaultServer

from evalkit.clients.factory import make_client, preflight
from evalkit.clients.openai_client import OpenAIClient
from evalkit.clients.spec import ClientSpec
from evalkit.clients.wire import parse_completion
from evalkit.core.errors import ModelCallError, UserError
from evalkit.core.types import SamplingArgs

SECRET = "sk-test-SECRET-0123456789"


@pytest.fixture(scope="module")
def servers():
    started: list[FaultServer] = []

    def start(*args: str) -> FaultServer:
        server = FaultServer(*args)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def fast_client(server: FaultServer, **kwargs) -> OpenAIClient:
    return OpenAIClient("m", server.base_url, kwargs.pop("api_key", None), backoff_base_s=0.01, **kwargs)


def chat(client: OpenAIClient, text: str, sampling: SamplingArgs | None = None):
    async def go():
        try:
            return await client.chat([{"role": "user", "content": text}], sampling or SamplingArgs())
        finally:
            await client.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("fault", ["429", "500", "503", "drop", "badjson", "empty"])
def test_each_fault_is_retried_then_succeeds(servers, fault):
    server = servers("--faults", f"{fault},{fault}")
    completion = chat(fast_client(server, max_retries=2), "hello")
    assert completion.text == "olleh"


def test_fault_beyond_retries_raises_model_call_error(servers):
    server = servers("--faults", "500,500,500")
    with pytest.raises(ModelCallError, match="HTTP 500.*after 3 attempts"):
        chat(fast_client(server, max_retries=2), "hello")


def test_client_error_is_not_retried(servers):
    server = servers("--faults", "400")
    with pytest.raises(ModelCallError) as info:
        chat(fast_client(server, max_retries=3), "hello")
    assert info.value.status == 400 and not info.value.retryable


@pytest.mark.timing
def test_read_timeout_is_retried(servers):
    server = servers("--faults", "timeout", "--timeout-sleep", "2")
    started = time.perf_counter()
    completion = chat(fast_client(server, timeout=0.4, max_retries=1), "hello")
    assert completion.text == "olleh"
    assert time.perf_counter() - started < 1.8


@pytest.mark.timing
def test_retry_after_is_honoured(servers):
    server = servers("--faults", "429", "--retry-after", "1")
    started = time.perf_counter()
    chat(fast_client(server, max_retries=1), "hello")
    assert time.perf_counter() - started >= 0.95


def test_token_ids_and_logprobs_are_kept(servers):
    server = servers()
    sampling = SamplingArgs(logprobs=True, extra={"return_token_ids": True})
    completion = chat(fast_client(server), "abc", sampling)
    assert completion.prompt_token_ids == [1, 2, 3]
    assert completion.completion_token_ids == [5, 6]
    assert completion.logprobs == [-0.5, -0.25]
    assert completion.usage.input_tokens == 7


def test_tool_calls_are_parsed():
    data = {"choices": [{"message": {"content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}},
        {"id": "c2", "type": "function", "function": {"name": "calc", "arguments": {"a": 1}}},
    ]}, "finish_reason": "tool_calls"}]}
    completion = parse_completion(data)
    assert [(c.id, c.name, c.arguments) for c in completion.tool_calls] == [
        ("c1", "search", '{"q": "x"}'), ("c2", "calc", '{"a": 1}')]
    assert completion.finish_reason == "tool_calls" and completion.text == ""


def test_key_is_sent_but_never_shown(servers, monkeypatch):
    server = servers("--faults", "500,500,500,500")
    monkeypatch.setenv("MY_TEST_KEY", SECRET)
    client = make_client(ClientSpec("m", server.base_url, "MY_TEST_KEY", max_retries=1, backoff_base_s=0.01))
    assert SECRET not in repr(client) and SECRET not in str(vars(client).get("base_url"))
    with pytest.raises(ModelCallError) as info:
        chat(client, "hello")
    assert SECRET not in str(info.value)
    import json
    import urllib.request

    seen = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{server.port}/auth_log").read())
    assert f"Bearer {SECRET}" in seen


@pytest.mark.timing
def test_preflight_fails_fast_on_unreachable_url():

    port = free_port()  # a port nobody listens on
    client = OpenAIClient("m", f"http://127.0.0.1:{port}/v1", max_retries=3)
    started = time.perf_counter()
    with pytest.raises(UserError, match="cannot connect"):
        asyncio.run(preflight(client))
    assert time.perf_counter() - started < 2


def test_missing_key_var_is_a_user_error(monkeypatch):
    monkeypatch.delenv("NOPE_KEY_VAR", raising=False)
    with pytest.raises(UserError, match="NOPE_KEY_VAR is not set"):
        make_client(ClientSpec("m", "http://127.0.0.1:1/v1", "NOPE_KEY_VAR"))


def test_endpoints_replicas_round_robin(servers, tmp_path):
    a, b = servers(), servers()
    (tmp_path / "endpoints.toml").write_text(
        f'[[endpoint]]\nendpoint_id = "pair"\nmodel = "m"\nurl = "{a.base_url}"\n\n'
        f'[[endpoint]]\nendpoint_id = "pair"\nmodel = "m"\nurl = "{b.base_url}"\n'
    )
    client = make_client(ClientSpec("pair", endpoints_path=str(tmp_path / "endpoints.toml")))
    assert client.base_url == f"{a.base_url},{b.base_url}"

    async def go():
        try:
            for _ in range(4):
                await client.chat([{"role": "user", "content": "x"}], SamplingArgs())
        finally:
            await client.aclose()

    asyncio.run(go())
    import json
    import urllib.request

    counts = [len(json.loads(urllib.request.urlopen(f"http://127.0.0.1:{s.port}/auth_log").read())) for s in (a, b)]
    assert counts == [2, 2]


def test_placeholder_keys_work_for_local_servers_as_in_verifiers(servers, tmp_path, monkeypatch):
    """``"key": "local"`` (an endpoints.py habit) and an unset key variable for a server on this machine send
    verifiers' placeholder key instead of refusing; an unset key for a remote server is still an error."""
    server = servers()
    monkeypatch.delenv("local", raising=False)
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    (tmp_path / "endpoints.py").write_text(
        f'ENDPOINTS = {{"mine": {{"model": "m", "url": "{server.base_url}", "key": "local"}},\n'
        f'             "vllm": {{"model": "m", "url": "http://localhost:{server.port}/v1", "key": "VLLM_API_KEY"}},\n'
        '             "far": {"model": "m", "url": "https://api.example.com/v1", "key": "VLLM_API_KEY"}}\n'
    )
    import json
    import urllib.request

    async def ask(endpoint: str) -> str:
        client = make_client(ClientSpec(endpoint, endpoints_path=str(tmp_path / "endpoints.py")))
        try:
            return (await client.chat([{"role": "user", "content": "hi"}], SamplingArgs(max_tokens=4))).text
        finally:
            await client.aclose()

    assert all(asyncio.run(ask(endpoint)) for endpoint in ("mine", "vllm"))
    seen = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{server.port}/auth_log").read())
    assert seen == ["Bearer EMPTY", "Bearer EMPTY"]
    with pytest.raises(UserError, match="VLLM_API_KEY is not set"):
        make_client(ClientSpec("far", endpoints_path=str(tmp_path / "endpoints.py")))


def test_unknown_endpoint_id_lists_known(tmp_path):
    (tmp_path / "endpoints.toml").write_text('[[endpoint]]\nendpoint_id = "one"\nmodel = "m"\nurl = "http://x/v1"\n')
    with pytest.raises(UserError, match="'two' not found.*known: one"):
        make_client(ClientSpec(endpoint_id="two", endpoints_path=str(tmp_path / "endpoints.toml")))


@pytest.mark.parametrize(
    ("model", "base_url", "local"),
    [(None, None, True), ("local/smollm2-135m", None, True), ("./weights/step_3", None, True),
     ("Qwen/Qwen3-8B", "http://127.0.0.1:9/v1", False), ("local/smollm2-135m", "http://127.0.0.1:9/v1", True)],
)
def test_routing_to_the_embedded_engine(monkeypatch, model, base_url, local):
    from evalkit.clients import factory

    routed: list[str] = []
    monkeypatch.setattr(factory, "make_local_client", lambda name, device=None: routed.append(name) or "LOCAL")
    client = factory.make_client(ClientSpec(model, base_url))
    assert (client == "LOCAL") is local
    if local:
        assert routed == [model or "local/smollm2-135m"]


def test_model_folder_routes_to_the_embedded_engine(monkeypatch, tmp_path):
    from evalkit.clients import factory

    (tmp_path / "config.json").write_text("{}")
    monkeypatch.setattr(factory, "make_local_client", lambda name, device=None: ("LOCAL", name))
    assert factory.make_client(ClientSpec(str(tmp_path))) == ("LOCAL", str(tmp_path))


def test_serves_as_rl_vllm_client_extras_adapter_names_no_key_fresh_loops(servers):
    """RL's needs: vLLM extras pass through, the model name may change per request (LoRA adapters),
    no key, and each batch may run in a fresh event loop without leaking the previous loop's session."""
    import gc
    import json
    import urllib.request
    import warnings

    server = servers()
    client = OpenAIClient("base", server.base_url, None)
    sampling = SamplingArgs(max_tokens=8, temperature=1.0, logprobs=True,
                            extra={"return_token_ids": True, "skip_special_tokens": False})

    async def one(close: bool):
        try:
            return await client.chat([{"role": "user", "content": "abc"}], sampling)
        finally:
            if close:
                await client.aclose()

    gc.collect()  # earlier tests' garbage is not this test's business
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = asyncio.run(one(close=True))  # a fresh loop per batch, closed at its end (the documented use)
        client.model = "step_1"
        second = asyncio.run(one(close=True))
        gc.collect()
    assert not [str(w.message) for w in caught if "unclosed" in str(w.message).lower()]
    assert first.completion_token_ids == second.completion_token_ids == [5, 6] and second.logprobs == [-0.5, -0.25]
    asyncio.run(one(close=False))  # a loop that forgot aclose() does not break the next one
    assert asyncio.run(one(close=True)).text == "cba"
    bodies = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{server.port}/body_log").read())
    assert [b["model"] for b in bodies] == ["base", "step_1", "step_1", "step_1"]
    assert all(
        b["return_token_ids"] is True and b["skip_special_tokens"] is False and b["logprobs"] is True for b in bodies
    )
    seen = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{server.port}/auth_log").read())
    assert seen == [""] * 4
