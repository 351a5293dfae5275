"""The batching engine against real tensors: the embedded SmolLM2 (fp32, shared per process) and
tiny random-weight Llamas built from a config (fast, and free to mutate).

Marked slow: the first test of a fresh machine converts the GGUF once (~30 s).
"""

from __future__ import annotations

import asyncio
import threading

import pytest
import torch

from evalkit.core.errors import ModelCallError
from evalkit.core.types import SamplingArgs
from evalkit.model.requests import InvalidRequest

pytestmark = pytest.mark.slow

PROMPTS = ["What is the capital of France?", "Write one sentence about cats.", "Count from 1 to 5."]


@pytest.fixture(scope="module")
def engine():
    from evalkit.model.shared import get_engine

    return get_engine("local/smollm2-135m", dtype="fp32", max_batch=8, device="cpu")


def _chat(engine, text: str) -> list[int]:
    return engine.encode_chat([{"role": "user", "content": text}])


def _forward_logprobs(model, prompt: list[int], completion: list[int], temperature: float = 1.0) -> torch.Tensor:
    """log p(completion[i]) from one plain transformers forward over prompt + completion."""
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
    logprobs = torch.log_softmax(logits / temperature, dim=-1)
    return logprobs.gather(-1, torch.tensor(completion)[:, None]).squeeze(-1)


# -- the embedded model ----------------------------------------------------------------------------


def test_batched_greedy_equals_unbatched(engine):
    assert engine.backend == "fused" and engine.device.type == "cpu"
    prompts = [_chat(engine, p) for p in PROMPTS]
    lengths = [6, 12, 9]  # sequences leave the batch at different steps
    futures = [engine.submit(p, SamplingArgs(max_tokens=n, temperature=0)) for p, n in zip(prompts, lengths)]
    batched = [f.result() for f in futures]
    alone = [engine.generate_many([p], SamplingArgs(max_tokens=n, temperature=0))[0] for p, n in zip(prompts, lengths)]
    assert [r.token_ids for r in batched] == [r.token_ids for r in alone]
    assert [r.text for r in batched] == [r.text for r in alone]
    for result, n in zip(batched, lengths):
        assert result.finish_reason in ("stop", "length") and len(result.token_ids) <= n
        assert len(result.logprobs) == len(result.token_ids)
        if result.finish_reason == "stop":
            assert result.token_ids[-1] in engine.stop_token_ids and "<|im_end|>" not in result.text


def test_logprobs_match_a_separate_forward_pass(engine):
    prompt = _chat(engine, PROMPTS[1])
    greedy, sampled = engine.generate_many(
        [prompt, prompt], SamplingArgs(max_tokens=10, temperature=0.0, extra={"ignore_eos": True})
    )
    hot = engine.generate_many(
        [prompt], SamplingArgs(max_tokens=10, temperature=0.8, seed=3, extra={"ignore_eos": True})
    )[0]
    for result, temperature in ((greedy, 1.0), (sampled, 1.0), (hot, 0.8)):
        expected = _forward_logprobs(engine.model, prompt, result.token_ids, temperature)
        assert torch.allclose(torch.tensor(result.logprobs), expected, atol=1e-3), (result.logprobs, expected)


def test_stop_strings_cut_the_text(engine):
    prompt = _chat(engine, "Count from 1 to 10, separated by commas.")
    free = engine.generate_many([prompt], SamplingArgs(max_tokens=16, temperature=0))[0]
    assert "3" in free.text
    stopped = engine.generate_many([prompt], SamplingArgs(max_tokens=16, temperature=0, stop=["3"]))[0]
    assert stopped.finish_reason == "stop"
    assert stopped.text == free.text[: free.text.index("3")]
    assert stopped.token_ids == free.token_ids[: len(stopped.token_ids)] and len(stopped.token_ids) < len(
        free.token_ids
    )


def test_max_tokens_is_respected(engine):
    prompt = _chat(engine, PROMPTS[0])
    result = engine.generate_many([prompt], SamplingArgs(max_tokens=5, temperature=0, extra={"ignore_eos": True}))[0]
    assert len(result.token_ids) == 5 and result.finish_reason == "length"
    assert result.prompt_ids == prompt


def test_seeded_sampling_is_reproducible(engine):
    prompt = _chat(engine, PROMPTS[1])
    args = SamplingArgs(max_tokens=8, temperature=1.0, top_p=0.95, seed=1234)
    first, other_seed = (
        f.result() for f in [engine.submit(prompt, args), engine.submit(prompt, args.merged({"seed": 99}))]
    )
    again = engine.generate_many([_chat(engine, PROMPTS[0]), prompt, _chat(engine, PROMPTS[2])], args)[1]
    assert first.token_ids == again.token_ids  # same seed, different batch-mates
    assert other_seed.token_ids != first.token_ids


async def test_bad_requests_fail_alone(engine):
    from evalkit.clients.local import LocalClient

    client = LocalClient("local/smollm2-135m", dtype="fp32", engine=engine)
    good = [{"role": "user", "content": p} for p in PROMPTS]
    too_long = [{"role": "user", "content": "hello " * 9000}]
    calls = [client.chat([m], SamplingArgs(max_tokens=6, temperature=0)) for m in good]
    calls.insert(1, client.chat(too_long, SamplingArgs(max_tokens=6)))
    calls.insert(3, client.chat([good[0]], SamplingArgs(max_tokens=0)))
    calls.append(client.chat([good[0]], SamplingArgs(max_tokens=8190)))  # prompt + max_tokens > 8192
    results = await asyncio.gather(*calls, return_exceptions=True)
    errors = [r for r in results if isinstance(r, Exception)]
    assert len(errors) == 3 and all(isinstance(e, ModelCallError) for e in errors)
    assert "context window" in str(results[1]) and "max_tokens" in str(results[3])
    completions = [r for r in results if not isinstance(r, Exception)]
    assert len(completions) == 3
    for completion in completions:
        assert completion.text and completion.usage.output_tokens == len(completion.completion_token_ids) <= 6
        assert (
            completion.usage.input_tokens == len(completion.prompt_token_ids)
            and len(completion.logprobs) == completion.usage.output_tokens
        )


async def test_cancelled_request_frees_its_slot(engine):
    prompt = _chat(engine, PROMPTS[0])
    task = asyncio.ensure_future(
        engine.generate(prompt, SamplingArgs(max_tokens=2000, temperature=0, extra={"ignore_eos": True}))
    )
    await asyncio.sleep(0.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    result = await asyncio.wait_for(engine.generate(prompt, SamplingArgs(max_tokens=4, temperature=0)), timeout=60)
    assert len(result.token_ids) <= 4


def test_invalid_requests_raise_at_submission(engine):
    with pytest.raises(InvalidRequest, match="empty"):
        engine.submit([], SamplingArgs(max_tokens=3))
    with pytest.raises(InvalidRequest, match="token ids"):
        engine.submit([10**9], SamplingArgs(max_tokens=3))


def test_tools_reach_the_prompt(engine):
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    text = engine.tokenizer.decode(engine.encode_chat([{"role": "user", "content": "hi"}], [tool]))
    assert text.startswith("<|im_start|>system\nYou can call these tools") and '"name": "lookup"' in text


# -- tiny random-weight models -----------------------------------------------------------------


def _tiny(seed: int = 0, bias: bool = False):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=True, attention_bias=bias,
        bos_token_id=1, eos_token_id=2, pad_token_id=2,
    )
    return LlamaForCausalLM(config).eval()


def _tiny_engine(engine, model, max_batch: int = 8, dtype: str = "fp32", **kwargs):
    from evalkit.model.engine import Engine

    return Engine(model, engine.tokenizer, dtype=dtype, max_batch=max_batch, name="tiny", device="cpu", **kwargs)


GREEDY = SamplingArgs(max_tokens=8, temperature=0, extra={"ignore_eos": True})
PROMPT_IDS = [[1, 400, 401, 402], [1, 500, 9, 9, 9, 9, 9, 33], [1, 7], [1, 1000, 2000, 3000, 4000, 5000], [1, 42, 43]]


def test_fused_forward_matches_transformers_with_biases(engine):
    model = _tiny(bias=True)
    tiny = _tiny_engine(engine, model)
    try:
        for result, prompt in zip(tiny.generate_many(PROMPT_IDS, GREEDY), PROMPT_IDS):
            expected = _forward_logprobs(model, prompt, result.token_ids)
            assert torch.allclose(torch.tensor(result.logprobs), expected, atol=1e-4)
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([prompt + result.token_ids])).logits[0, len(prompt) - 1 : -1]
            assert logits.argmax(-1).tolist() == result.token_ids
    finally:
        tiny.close()


def test_continuous_batching_beyond_max_batch(engine):
    tiny = _tiny_engine(engine, _tiny(), max_batch=2)
    try:
        lengths = [3, 8, 1, 6, 8]
        futures = [
            tiny.submit(p, SamplingArgs(max_tokens=n, temperature=0, extra={"ignore_eos": True}))
            for p, n in zip(PROMPT_IDS, lengths)
        ]
        together = [f.result(timeout=60) for f in futures]
        alone = [
            tiny.generate_many([p], SamplingArgs(max_tokens=n, temperature=0, extra={"ignore_eos": True}))[0]
            for p, n in zip(PROMPT_IDS, lengths)
        ]
        assert [len(r.token_ids) for r in together] == lengths
        assert [r.token_ids for r in together] == [r.token_ids for r in alone]
    finally:
        tiny.close()


def test_repetition_penalty_covers_prompt_and_generated_tokens(engine):
    """A huge penalty: no token of the prompt or of the reply so far comes again, in a batch that
    mixes penalized and plain requests and compacts its slots (max_batch 2, different lengths)."""
    tiny = _tiny_engine(engine, _tiny(), max_batch=2)
    strong = {"ignore_eos": True, "repetition_penalty": 1e6}
    try:
        asks = [(p, SamplingArgs(max_tokens=n, temperature=0, extra=strong if i % 2 else {"ignore_eos": True}))
                for i, (p, n) in enumerate(zip(PROMPT_IDS, [3, 8, 2, 6, 8]))]
        together = [f.result(timeout=60) for f in [tiny.submit(p, s) for p, s in asks]]
        for i, ((prompt, sampling), result) in enumerate(zip(asks, together)):
            if i % 2:
                assert not set(result.token_ids) & set(prompt) and len(set(result.token_ids)) == len(result.token_ids)
            assert result.token_ids == tiny.generate_many([prompt], sampling)[0].token_ids
    finally:
        tiny.close()


def test_requests_wait_for_kv_cache_room(engine):
    # 2 layers x 2 kv heads x 16 dims x 2 (K, V) x 4 bytes = 512 B per position; one 64-position slot fits
    tiny = _tiny_engine(engine, _tiny(), max_batch=8, kv_cache_gb=50e3 / 2**30)
    try:
        futures = [tiny.submit(p, GREEDY) for p in PROMPT_IDS]
        together = [f.result(timeout=60) for f in futures]
        alone = [tiny.generate_many([p], GREEDY)[0] for p in PROMPT_IDS]
        assert [r.token_ids for r in together] == [r.token_ids for r in alone]
        first, second = together[0].timing, together[1].timing
        assert second["queue_ms"] >= 0.8 * first["total_ms"]  # it waited for the first to finish
    finally:
        tiny.close()


def test_update_weights_from_a_state_dict(engine):
    old, new = _tiny(seed=0), _tiny(seed=1)
    tiny = _tiny_engine(engine, old)
    reference = _tiny_engine(engine, _tiny(seed=1))
    try:
        before = tiny.generate_many(PROMPT_IDS[:2], GREEDY)
        assert tiny.update_weights(new.state_dict()) == 1
        after = tiny.generate_many(PROMPT_IDS[:2], GREEDY)
        expected = reference.generate_many(PROMPT_IDS[:2], GREEDY)
        assert [r.token_ids for r in after] == [r.token_ids for r in expected] != [r.token_ids for r in before]
        assert [r.weights_version for r in before + after] == [0, 0, 1, 1]
        with pytest.raises(KeyError):
            tiny.update_weights({"not.a.weight": torch.zeros(1)})
        assert tiny.generate_many(PROMPT_IDS[:1], GREEDY)[0].token_ids == after[0].token_ids  # still serving
    finally:
        tiny.close()
        reference.close()


def test_update_weights_drains_requests_in_flight(engine):
    tiny = _tiny_engine(engine, _tiny())
    try:
        long_args = SamplingArgs(max_tokens=200, temperature=0, extra={"ignore_eos": True})
        in_flight = [tiny.submit(p, long_args) for p in PROMPT_IDS[:2]]
        versions: list[int] = []
        updater = threading.Thread(target=lambda: versions.append(tiny.update_weights(_tiny(seed=2).state_dict())))
        updater.start()
        updater.join(timeout=120)
        assert versions == [1]
        assert [f.result().weights_version for f in in_flight] == [0, 0]
        assert tiny.generate_many(PROMPT_IDS[:1], GREEDY)[0].weights_version == 1
    finally:
        tiny.close()


def test_update_weights_merges_a_trained_lora(engine):
    peft = pytest.importorskip("peft")
    model = _tiny()
    tiny = _tiny_engine(engine, model)
    try:
        before = tiny.generate_many(PROMPT_IDS[:2], GREEDY)
        config = peft.LoraConfig(
            r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "gate_proj", "down_proj"], init_lora_weights=False
        )
        wrapped = peft.get_peft_model(model, config)  # injects LoRA layers into the engine's module in place
        with torch.no_grad():
            for name, param in wrapped.named_parameters():
                if "lora_B" in name:
                    param.mul_(50.0)  # a delta large enough to change greedy tokens
        tiny.update_weights()
        after = tiny.generate_many(PROMPT_IDS[:2], GREEDY)
        assert [r.token_ids for r in after] != [r.token_ids for r in before]
        for result, prompt in zip(after, PROMPT_IDS[:2]):
            expected = _forward_logprobs(wrapped, prompt, result.token_ids)
            assert torch.allclose(torch.tensor(result.logprobs), expected, atol=1e-4)
    finally:
        tiny.close()


def test_bf16_engine_runs(engine):
    tiny = _tiny_engine(engine, _tiny(), dtype="bf16")
    try:
        results = tiny.generate_many(PROMPT_IDS, GREEDY)
        assert all(len(r.token_ids) == 8 and all(lp <= 0 for lp in r.logprobs) for r in results)
    finally:
        tiny.close()


def test_model_folder_and_adapter_folder_load_by_path(engine, tmp_path):
    peft = pytest.importorskip("peft")
    from evalkit.model.engine import Engine

    folder = tmp_path / "weights" / "step_1"
    model = _tiny(seed=3)
    model.save_pretrained(folder)  # like RL's export: weights and config, no tokenizer
    wrapped = peft.get_peft_model(
        _tiny(seed=3), peft.LoraConfig(r=2, target_modules=["q_proj"], init_lora_weights=False)
    )
    wrapped.peft_config["default"].base_model_name_or_path = str(folder)
    wrapped.save_pretrained(tmp_path / "adapter")

    for path, reference in ((folder, model), (tmp_path / "adapter", wrapped)):
        loaded = Engine.from_name(str(path), dtype="fp32", max_batch=2, device="cpu")
        try:
            result = loaded.generate_many(PROMPT_IDS[:1], GREEDY)[0]
            expected = _forward_logprobs(reference, PROMPT_IDS[0], result.token_ids)
            assert torch.allclose(torch.tensor(result.logprobs), expected, atol=1e-4)
            assert loaded.tokenizer.chat_template and loaded.name == str(path)
        finally:
            loaded.close()
