"""The prefix cache holds K/V of one weights version only: a sequence in flight across
``update_weights(drain=False)`` cannot save its old-weight K/V into the new cache, and a later request
gets what a fresh engine on the new weights computes. A tiny random-weight Llama (tests/support/tiny_model.py)."""

from __future__ import annotations

import copy
import threading

import pytest
import torch
from support.tiny_model import build_tokenizer, write_tiny_model

from evalkit.core.types import SamplingArgs
from evalkit.model.kvcache import CacheShape, KVCache
from evalkit.model.prefix_cache import PrefixCache

GREEDY = SamplingArgs(max_tokens=200, temperature=0, extra={"ignore_eos": True})


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory):
    from transformers import AutoModelForCausalLM

    folder = write_tiny_model(tmp_path_factory.mktemp("tiny") / "model")
    old = AutoModelForCausalLM.from_pretrained(folder).eval()
    new = copy.deepcopy(old)
    torch.manual_seed(1)
    with torch.no_grad():
        for parameter in new.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.5)
    return old, new


def _engine(model, prefix_gb: float):
    from evalkit.model.engine import Engine

    return Engine(copy.deepcopy(model), build_tokenizer(), dtype="float32", max_batch=4, name="tiny", device="cpu",
                  threads=1, prefix_cache_gb=prefix_gb)


@pytest.mark.slow
def test_a_sequence_in_flight_across_an_update_saves_nothing_old_into_the_new_cache(models) -> None:
    old, new = models
    engine, reference = _engine(old, 0.1), _engine(new, 0.0)
    try:
        prompt = engine.encode_chat([{"role": "user", "content": "count the letters in this sentence, please"}])
        going = threading.Event()

        def slow(ids: list[int], logprobs: list[float]) -> None:  # keeps the sequence in flight for the update
            going.set()
            threading.Event().wait(0.005)

        first = engine.submit(prompt, GREEDY, on_tokens=slow)
        assert going.wait(30)
        engine.update_weights(new.state_dict(), drain=False)
        result = first.result(timeout=120)
        assert result.weights_version == 1 and len(result.token_ids) == 200  # it was in flight across the update
        assert engine.prefix_stats()["entries"] == 0, "K/V computed under the old weights were saved after the update"

        follow_up = prompt + result.token_ids + prompt[-5:]
        again = engine.generate_many(
            [follow_up], SamplingArgs(max_tokens=8, temperature=0, extra={"ignore_eos": True})
        )[0]
        fresh = reference.generate_many(
            [follow_up], SamplingArgs(max_tokens=8, temperature=0, extra={"ignore_eos": True})
        )[0]
        assert again.cached_tokens == 0 and again.token_ids == fresh.token_ids
        assert again.logprobs == pytest.approx(fresh.logprobs, abs=1e-4)
    finally:
        engine.close()
        reference.close()


def test_entries_carry_their_version_and_lookups_skip_other_versions() -> None:
    shape = CacheShape(num_layers=1, num_kv_heads=1, head_dim=4, max_positions=64)
    cache = KVCache(shape, 1, torch.float32, torch.device("cpu"))
    cache.ensure(1, 40)
    prefixes = PrefixCache(shape, torch.float32, torch.device("cpu"), budget_bytes=1 << 20)
    tokens = list(range(40))
    prefixes.save(cache, 0, tokens[:32], version=0)
    assert prefixes.lookup(tokens)[1] == 32 and prefixes.entries[next(iter(prefixes.entries))].version == 0
    prefixes.new_weights()
    prefixes.save(cache, 0, tokens[:32], version=0)  # computed before the update: not kept
    assert prefixes.lookup(tokens) == (None, 0) and not prefixes.entries
    prefixes.save(cache, 0, tokens[:32], version=1)
    entry, reused = prefixes.lookup(tokens)
    assert reused == 32 and entry is not None and entry.version == 1
    entry.version = 0  # an entry of another version is never handed out
    assert prefixes.lookup(tokens) == (None, 0)
