"""`prime serve` answers vLLM's `prompt_logprobs` (what a teacher for on-policy distillation needs): on
/v1/completions with a token-id prompt and on /v1/chat/completions, in vLLM's shape, with the numbers of a plain
forward of the model."""

from __future__ import annotations

from typing import Any

import pytest
from support.app_thread import serve_app
from support.tiny_model import write_tiny_model


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from evalkit.model.engine import Engine
    from evalkit.serving.app import build_app

    folder = write_tiny_model(tmp_path_factory.mktemp("serve") / "m")
    engine = Engine.from_name(str(folder), dtype="fp32", device="cpu", max_batch=4)
    try:
        with serve_app(build_app(engine, model_name="tiny")) as port:
            yield f"http://127.0.0.1:{port}", folder
    finally:
        engine.close()


def _expected(folder, ids: list[int]) -> Any:
    """log p(ids[i] | ids[:i]) by a plain transformers forward (no engine, no scoring helper)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)
    return logp


def test_completions_scores_a_token_id_prompt(server):
    import httpx

    url, folder = server
    ids = [5, 6, 7, 8, 40, 41]
    reply = httpx.post(f"{url}/v1/completions", json={"model": "tiny", "prompt": ids, "max_tokens": 1,
                                                      "prompt_logprobs": 2}, timeout=60)
    assert reply.status_code == 200, reply.text
    choice = reply.json()["choices"][0]
    assert choice["prompt_token_ids"] == ids and len(choice["token_ids"]) == 1
    entries = choice["prompt_logprobs"]
    assert len(entries) == len(ids) and entries[0] is None
    logp = _expected(folder, ids)
    for i in range(1, len(ids)):
        entry = entries[i]
        given = entry[str(ids[i])]
        assert given["logprob"] == pytest.approx(float(logp[i - 1, ids[i]]), abs=1e-4)
        assert given["rank"] == int((logp[i - 1] > logp[i - 1, ids[i]]).sum()) + 1
        assert isinstance(given["decoded_token"], str)
        best = int(logp[i - 1].argmax())
        assert entry[str(best)]["rank"] == 1 and 2 <= len(entry) <= 3  # the given token and the 2 most likely


def test_chat_completions_scores_its_rendered_prompt(server):
    import httpx

    url, folder = server
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "prompt_logprobs": 0}
    reply = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=60).json()
    ids, entries = reply["prompt_token_ids"], reply["prompt_logprobs"]
    assert len(entries) == len(ids) and entries[0] is None and all(len(e) == 1 for e in entries[1:])
    logp = _expected(folder, ids)
    assert entries[-1][str(ids[-1])]["logprob"] == pytest.approx(float(logp[-2, ids[-1]]), abs=1e-4)


@pytest.mark.parametrize("body, needle", [
    ({"prompt": [5, 6], "prompt_logprobs": 21}, "prompt_logprobs must be an integer from 0 to 20"),
    ({"prompt": [5, 9999], "prompt_logprobs": 0, "max_tokens": 1}, "prompt token ids must be in [0,"),
    ({"prompt": [], "prompt_logprobs": 0}, "prompt must be a non-empty string or a non-empty list of token ids"),
    ({"prompt": [5, 6], "prompt_logprobs": 0, "stream": True}, "stream is not served on /v1/completions"),
])
def test_bad_scoring_requests_are_400(server, body, needle):
    import httpx

    reply = httpx.post(f"{server[0]}/v1/completions", json=body, timeout=60)
    assert reply.status_code == 400 and needle in reply.json()["error"]["message"], reply.text


def test_streamed_chat_with_prompt_logprobs_is_400(server):
    import httpx

    body = {"messages": [{"role": "user", "content": "hi"}], "stream": True, "prompt_logprobs": 0}
    reply = httpx.post(f"{server[0]}/v1/chat/completions", json=body, timeout=60)
    assert reply.status_code == 400 and "prompt_logprobs is not served with stream" in reply.text
