"""Per-request limits of `prime serve` (docs/serve-limits.md): a value out of range is a 400 for that
request only, and a request in flight for another client finishes untouched. The server is the real
app under uvicorn on 127.0.0.1 (a thread of this process) over a tiny random-weight model."""

from __future__ import annotations

import http.client
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support.app_thread import serve_app
from support.tiny_model import build_tokenizer, write_tiny_model

from evalkit.core.sampling_rules import MAX_STOP_CHARS, MAX_STOP_STRINGS, MAX_TOP_K

MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.fixture(scope="module")
def tiny_server(tmp_path_factory: pytest.TempPathFactory):
    from transformers import AutoModelForCausalLM

    from evalkit.model.engine import Engine
    from evalkit.serving.app import build_app

    folder = write_tiny_model(tmp_path_factory.mktemp("tiny") / "model", hidden_size=128, layers=4)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    engine = Engine(model, build_tokenizer(), dtype="float32", max_batch=8, name="tiny", device="cpu", threads=1)
    try:
        with serve_app(build_app(engine)) as port:
            yield port
    finally:
        engine.close()


def post(port: int, body: bytes | dict) -> tuple[int, dict, str]:
    """(status, JSON body, content type) of one chat request."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    payload = body if isinstance(body, bytes) else json.dumps(body).encode()
    connection.request("POST", "/v1/chat/completions", payload, {"Content-Type": "application/json"})
    response = connection.getresponse()
    raw = response.read()
    connection.close()
    kind = response.getheader("content-type") or ""
    return response.status, (json.loads(raw) if kind.startswith("application/json") else {"text": raw.decode()}), kind


def _long_stream_then(port: int, other: dict) -> tuple[list[str], tuple[int, dict, str]]:
    """Stream a long generation; once its first chunk has arrived (it is in the batch), send ``other``
    from a second client. The stream's SSE lines, and ``other``'s answer."""
    long = {"messages": MESSAGES, "max_tokens": 400, "temperature": 1.0, "ignore_eos": True, "stream": True, "n": 4}
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    connection.request("POST", "/v1/chat/completions", json.dumps(long).encode(), {"Content-Type": "application/json"})
    response = connection.getresponse()
    assert response.status == 200
    first = response.readline()
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(post, port, other)
        lines = [first.decode(), *(line.decode() for line in response)]
    connection.close()
    return lines, answer.result()


def _finished(lines: list[str]) -> list[str]:
    reasons = []
    for line in lines:
        if line.startswith("data: {"):
            for choice in json.loads(line[6:]).get("choices", []):
                if choice.get("finish_reason"):
                    reasons.append(choice["finish_reason"])
    return reasons


@pytest.mark.slow
@pytest.mark.parametrize("bad", [{"top_k": 10**30}, {"top_k": MAX_TOP_K + 1},
                                 {"stop": ["x" + str(i) for i in range(MAX_STOP_STRINGS + 1)]},
                                 {"stop": "y" * (MAX_STOP_CHARS + 1)}])
def test_an_out_of_range_request_is_400_and_the_one_in_flight_finishes(tiny_server: int, bad: dict) -> None:
    lines, (status, body, _) = _long_stream_then(tiny_server, {"messages": MESSAGES, "max_tokens": 4, **bad})
    assert status == 400 and body["error"]["type"] == "invalid_request_error", body
    assert next(iter(bad)) in body["error"]["message"] and len(body["error"]["message"]) < 400
    assert _finished(lines) == ["length"] * 4 and [line for line in lines if line.strip()][-1].strip() == "data: [DONE]"


@pytest.mark.parametrize(
    ("bad", "word"),
    [
        ({"n": 17}, "n"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": 2**40}, "max_tokens"),
        ({"top_logprobs": 21}, "top_logprobs"),
        ({"logprobs": "yes"}, "logprobs"),
        ({"temperature": -1}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"min_p": 2}, "min_p"),
        ({"repetition_penalty": 0}, "repetition_penalty"),
        ({"top_k": -2}, "top_k"),
        ({"stop": [3]}, "stop"),
    ],
)
def test_each_sampling_range_is_a_400(tiny_server: int, bad: dict, word: str) -> None:
    status, body, _ = post(tiny_server, {"messages": MESSAGES, "max_tokens": 2, **bad})
    assert status == 400 and word in body["error"]["message"], body


def test_limits_at_their_bounds_are_served(tiny_server: int) -> None:
    """``top_k`` beyond the vocabulary is no limit; the caps themselves are allowed."""
    edge = {"messages": MESSAGES, "max_tokens": 3, "top_k": MAX_TOP_K, "n": 16,
            "stop": ["z" * MAX_STOP_CHARS] * MAX_STOP_STRINGS}
    status, body, _ = post(tiny_server, edge)
    assert status == 200 and len(body["choices"]) == 16, body


def test_deep_nesting_huge_numbers_and_lone_surrogates_are_json_400s(
    tiny_server: int, caplog: pytest.LogCaptureFixture
) -> None:
    deep = b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    status, body, kind = post(tiny_server, deep)
    assert (status, kind) == (400, "application/json") and "nests too deeply" in body["error"]["message"]
    digits = b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": ' + b"9" * 5000 + b"}"
    status, body, kind = post(tiny_server, digits)
    assert (status, kind) == (400, "application/json") and "not valid JSON" in body["error"]["message"]
    lone = b'{"messages": [{"role": "user", "content": "hi \\ud800 there"}], "max_tokens": 2}'
    status, body, kind = post(tiny_server, lone)
    assert status == 400 and body["error"]["param"] == "messages", body
    assert "messages[0].content holds a lone UTF-16 surrogate" in body["error"]["message"]
    paired = b'{"messages": [{"role": "user", "content": "hi \\ud83d\\ude00"}], "max_tokens": 2}'
    assert post(tiny_server, paired)[0] == 200
    assert "Traceback" not in caplog.text


def test_the_eval_pre_run_check_refuses_a_huge_top_k_and_a_long_stop_list(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from primekit_cli.app import app

    for sampling in ({"top_k": 10**30}, {"stop": ["s"] * (MAX_STOP_STRINGS + 1)}):
        result = CliRunner().invoke(app, ["eval", "run", "reverse-text", "-m", "stub", "-b", "http://127.0.0.1:9/v1",
                                          "-o", str(tmp_path), "-S", json.dumps(sampling)])
        assert result.exit_code == 2 and result.output.startswith("error: "), result.output
        assert next(iter(sampling)) in result.output and len(result.output) < 400
