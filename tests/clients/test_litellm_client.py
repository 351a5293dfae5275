"""The litellm backend, offline: litellm's own mock responses and mock errors, and litellm's OpenAI
provider against a real fault-injecting server on 127.0.0.1.

Retries, timeouts, redaction and usage accounting must behave as they do for the HTTP client.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import time
import urllib.request

import pytest

if importlib.util.find_spec("litellm") is None:
    pytest.skip("the litellm extra is not installed (pip install 'primekit[litellm]')", allow_module_level=True)

from evalkit.clients.factory import make_client
from evalkit.clients.litellm_client import LiteLLMClient, import_litellm
from evalkit.clients.spec import ClientSpec
from evalkit.core.errors import ModelCallError, UserError
from evalkit.core.redact import REDACTED
from evalkit.core.types import SamplingArgs

PROVIDER_KEY = "ant-PRIVATE-provider-key-5151"
litellm = import_litellm()  # as the client imports it: offline (bundled cost map), quiet


def chat(client, sampling: SamplingArgs, text: str = "hi", tools=None):
    return asyncio.run(client.chat([{"role": "user", "content": text}], sampling, tools))


def client(**kwargs) -> LiteLLMClient:
    return LiteLLMClient("litellm/anthropic/claude-test", backoff_base_s=0.01, **kwargs)


def scripted_acompletion(monkeypatch, replies: list) -> list[dict]:
    """``litellm.acompletion`` fed one mock_response per attempt (litellm's own mock machinery)."""
    real = litellm.acompletion
    calls: list[dict] = []

    async def fake(**kwargs):
        calls.append(kwargs)
        return await real(**{**kwargs, "mock_response": replies[min(len(calls), len(replies)) - 1]})

    monkeypatch.setattr(litellm, "acompletion", fake)
    return calls


def test_spec_routes_litellm_names_to_the_litellm_client():
    built = make_client(ClientSpec("litellm/anthropic/claude-test", max_retries=5, timeout=9))
    assert isinstance(built, LiteLLMClient)
    assert (built.model, built.provider_model, built.policy.max_retries, built.timeout) == (
        "litellm/anthropic/claude-test", "anthropic/claude-test", 5, 9)


def test_text_usage_and_sampling_pass_through():
    reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "length"}],
             "usage": {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}}
    c = client()
    completion = chat(c, SamplingArgs(max_tokens=4, extra={"mock_response": reply}))
    assert (completion.text, completion.finish_reason) == ("hello", "length")
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (11, 4)
    kwargs = c.request_kwargs([], SamplingArgs(temperature=0.3, stop=["x"], extra={"top_logprobs": 2}), None, 5)
    assert kwargs["temperature"] == 0.3 and kwargs["stop"] == ["x"] and kwargs["top_logprobs"] == 2
    assert kwargs["num_retries"] == 0  # litellm's own retries are off: ours apply


def test_tool_calls_come_back_parsed():
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
    completion = chat(client(), SamplingArgs(extra={"mock_response": "", "mock_tool_calls": [call]}))
    assert [(t.id, t.name, t.arguments) for t in completion.tool_calls] == [("c1", "add", '{"a": 1}')]


def test_rate_limits_and_server_errors_are_retried_then_succeed(monkeypatch):
    calls = scripted_acompletion(monkeypatch, ["litellm.RateLimitError", "litellm.InternalServerError", "fine"])
    assert chat(client(max_retries=2), SamplingArgs()).text == "fine"
    assert len(calls) == 3


def test_retries_are_bounded_and_end_in_model_call_error(monkeypatch):
    calls = scripted_acompletion(monkeypatch, ["litellm.RateLimitError"])
    with pytest.raises(ModelCallError, match=r"HTTP 429.*after 3 attempts") as info:
        chat(client(max_retries=2), SamplingArgs())
    assert len(calls) == 3 and info.value.status == 429


@pytest.mark.timing
def test_retry_after_from_the_provider_is_honoured(monkeypatch):
    limited = litellm.RateLimitError(message="slow down", llm_provider="anthropic", model="claude-test",
                                     headers={"retry-after": "1"})
    scripted_acompletion(monkeypatch, [limited, "ok"])
    started = time.perf_counter()
    assert chat(client(max_retries=1), SamplingArgs()).text == "ok"
    assert time.perf_counter() - started >= 0.95


def test_auth_errors_fail_at_once_with_the_provider_key_redacted(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", PROVIDER_KEY)  # litellm reads it itself; we never handle it
    echoed = litellm.AuthenticationError(
        message=f"invalid key {PROVIDER_KEY}", llm_provider="anthropic", model="claude-test"
    )
    calls = scripted_acompletion(monkeypatch, [echoed])
    with pytest.raises(ModelCallError) as info:
        chat(client(max_retries=3), SamplingArgs())
    assert len(calls) == 1 and info.value.status == 401 and not info.value.retryable
    assert PROVIDER_KEY not in str(info.value) and f"invalid key {REDACTED}" in str(info.value)


@pytest.mark.timing
def test_timeouts_are_retried_and_bounded():
    started = time.perf_counter()
    with pytest.raises(ModelCallError, match=r"timed out after 0.3 s \(after 2 attempts\)"):
        chat(client(max_retries=1, timeout=0.3), SamplingArgs(extra={"mock_timeout": True}))
    assert time.perf_counter() - started < 2


def test_missing_litellm_is_a_user_error_with_the_install_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "litellm", None)
    with pytest.raises(UserError, match=r"pip install 'primekit\[litellm\]'"):
        make_client(ClientSpec("litellm/anthropic/claude-test"))


def test_real_server_through_litellm_openai_provider(fault_servers, monkeypatch):
    """Our retry policy alone (litellm's is off: exactly two requests), key sent, echoed key scrubbed."""
    srv = fault_servers("--faults", "500")
    monkeypatch.setenv("LITELLM_TEST_KEY", PROVIDER_KEY)
    c = make_client(
        ClientSpec("litellm/openai/m", srv.base_url, "LITELLM_TEST_KEY", max_retries=1, backoff_base_s=0.01)
    )
    completion = chat(c, SamplingArgs(max_tokens=5), text="hello")
    assert completion.text == "olleh" and completion.usage.input_tokens == 7
    seen = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/auth_log").read())
    assert seen == [f"Bearer {PROVIDER_KEY}"] * 2

    echo = fault_servers("--faults", "echo401")
    c = make_client(ClientSpec("litellm/openai/m", echo.base_url, "LITELLM_TEST_KEY", max_retries=2))
    with pytest.raises(ModelCallError) as info:
        chat(c, SamplingArgs())
    assert "request headers were" in str(info.value) and PROVIDER_KEY not in str(info.value)


def test_eval_through_litellm_counts_usage_like_the_http_client(fault_servers, tmp_path, monkeypatch):
    from evalkit.eval.config import EvalConfig
    from evalkit.eval.runner import run_eval

    srv = fault_servers()
    monkeypatch.setenv("LITELLM_TEST_KEY", PROVIDER_KEY)
    results = {}
    for model in ("litellm/openai/m", "m"):
        config = EvalConfig(env_id="reverse-text", model=model, base_url=srv.base_url, api_key_var="LITELLM_TEST_KEY",
                            num_examples=3, rollouts_per_example=2, output_dir=str(tmp_path))
        results[model] = run_eval(config)
    via_litellm, via_http = results["litellm/openai/m"], results["m"]
    assert via_litellm.summary["num_errors"] == 0 and len(via_litellm.rows) == 6
    assert (
        via_litellm.metadata["usage"] == via_http.metadata["usage"]
        and via_http.metadata["total_usage"]["input_tokens"] == 42
    )
    assert [r["completion"] for r in via_litellm.rows] == [r["completion"] for r in via_http.rows]
    assert via_litellm.metadata["client_model"] == "litellm/openai/m"
