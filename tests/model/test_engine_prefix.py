"""Prefix reuse in the engine: a request that starts with tokens whose K/V the engine still holds
prefills only the rest, with the results of a full prefill (same greedy and seeded tokens, logprobs
equal up to float32 rounding), batched or alone, on the fused path and the Hugging Face fallback.

The cache itself (lookup, restore, covering, eviction within its bound) is tested on a small
hand-filled KV cache; the engine tests run the embedded SmolLM2 in float32.
"""

from __future__ import annotations

import pytest
import torch

from evalkit.core.types import SamplingArgs
from evalkit.model.kvcache import CacheShape, KVCache
from evalkit.model.prefix_cache import MIN_REUSE, PrefixCache, common_prefix

SHAPE = CacheShape(num_layers=2, num_kv_heads=1, head_dim=2, max_positions=512)
RULES = "You play a guessing game. Answer with one short sentence and nothing else. " * 4
QUESTIONS = ["Guess a colour.", "Guess a fruit.", "Guess a number."]


def _filled(slots: int = 4, length: int = 128) -> KVCache:
    """A cache whose value at (layer, slot, position) is 1000*layer + 100*slot + position (K) and its negative (V)."""
    cache = KVCache(SHAPE, slots, torch.float32)
    cache.ensure(slots, length)
    for layer in range(SHAPE.num_layers):
        for slot in range(slots):
            values = 1000 * layer + 100 * slot + torch.arange(cache.capacity, dtype=torch.float32)
            cache.k[layer][slot, 0] = values[:, None]
            cache.v[layer][slot, 0] = -values[:, None]
    return cache


def test_common_prefix():
    a = torch.tensor([1, 2, 3, 4])
    assert common_prefix(a, torch.tensor([1, 2, 9])) == 2
    assert common_prefix(a, torch.tensor([1, 2])) == 2 and common_prefix(a, a) == 4
    assert common_prefix(a, torch.tensor([], dtype=torch.long)) == 0 and common_prefix(a, torch.tensor([5])) == 0


def test_lookup_restores_the_longest_shared_prefix_and_leaves_one_token_to_prefill():
    cache = _filled()
    prefixes = PrefixCache(SHAPE, torch.float32, cache.device, budget_bytes=1e6)
    short, long = list(range(40)), list(range(60))
    prefixes.save(cache, 1, short)
    prefixes.save(cache, 2, list(range(30)) + [999] * 30)  # shares 30 tokens only
    entry, reuse = prefixes.lookup(long)
    assert reuse == 40 and entry is not None
    assert prefixes.lookup(short)[1] == 39  # the last prompt position is always computed
    assert prefixes.lookup(list(range(MIN_REUSE - 1)) + [7] * 20) == (None, 0)  # too little in common
    target = KVCache(SHAPE, 4, torch.float32)
    target.ensure(4, 64)
    prefixes.restore(entry, target, [3], reuse)
    for layer in range(SHAPE.num_layers):
        expected = 1000 * layer + 100 * 1 + torch.arange(40, dtype=torch.float32)
        assert torch.equal(target.k[layer][3, 0, :40, 0], expected) and torch.equal(
            target.v[layer][3, 0, :40, 0], -expected
        )
        assert not target.k[layer][3, 0, 40:].any()
    for slots in ([0, 2], [1, 2, 3]):  # a group's rollouts: one copy per layer, with a gap or without
        grouped = KVCache(SHAPE, 4, torch.float32)
        grouped.ensure(4, 64)
        prefixes.restore(entry, grouped, slots, 20)
        for layer in range(SHAPE.num_layers):
            expected = 1000 * layer + 100 * 1 + torch.arange(20, dtype=torch.float32)
            for slot in range(4):
                assert torch.equal(grouped.k[layer][slot, 0, :20, 0], expected if slot in slots else torch.zeros(20))
                assert torch.equal(grouped.v[layer][slot, 0, :20, 0], -expected if slot in slots else torch.zeros(20))
                assert not grouped.k[layer][slot, 0, 20:].any()


def test_a_longer_entry_replaces_the_ones_it_covers_and_eviction_keeps_the_bound():
    cache = _filled(length=256)
    per_position = KVCache.bytes_per_position(SHAPE, torch.float32)
    prefixes = PrefixCache(SHAPE, torch.float32, cache.device, budget_bytes=250 * per_position)
    prefixes.save(cache, 0, list(range(50)))
    prefixes.save(cache, 0, list(range(80)))  # covers the first
    assert len(prefixes.entries) == 1 and prefixes.nbytes == 80 * per_position
    prefixes.save(cache, 0, list(range(60)))  # already held inside the longer one
    assert len(prefixes.entries) == 1
    for start in (1000, 2000, 3000):  # unrelated conversations: the oldest go first
        prefixes.save(cache, 1, list(range(start, start + 100)))
        assert prefixes.nbytes <= prefixes.budget_bytes
    assert prefixes.lookup(list(range(80)))[1] == 0 and prefixes.lookup(list(range(3000, 3100)))[1] == 99
    prefixes.save(cache, 2, list(range(5000, 5300)))  # larger than the whole budget: not kept
    assert prefixes.lookup(list(range(5000, 5300)))[1] == 0
    prefixes.clear()
    assert not prefixes.entries and prefixes.nbytes == 0


def test_among_many_entries_sharing_a_header_lookup_finds_the_one_that_continues():
    """Entries are found through their whole-block prefixes, not by a scan: 300 conversations with
    one 40-token header, and the lookup still lands on the one a prompt continues, at full length."""
    cache = _filled(length=128)
    prefixes = PrefixCache(SHAPE, torch.float32, cache.device, budget_bytes=1e9)
    header = list(range(500, 540))
    conversations = [header + [1000 + 7 * i + j for j in range(20 + i % 30)] for i in range(300)]
    for conversation in conversations:
        prefixes.save(cache, 0, conversation)
    assert len(prefixes.entries) == 300
    for i in (0, 123, 299):
        entry, reuse = prefixes.lookup(conversations[i] + [3, 4, 5])
        assert reuse == len(conversations[i]) and entry.tokens.tolist() == conversations[i]
    entry, reuse = prefixes.lookup(header + [9] * 10)
    assert reuse == 40 and entry.tokens.tolist()[:40] == header
    prefixes.save(cache, 0, conversations[5] + [6] * 20)  # covers conversation 5, which goes
    assert (
        len(prefixes.entries) == 300 and prefixes.lookup(conversations[5] + [6] * 21)[1] == len(conversations[5]) + 20
    )


def test_indexed_lookups_agree_with_a_full_scan_through_saves_covers_and_evictions():
    """Random conversations over a small vocabulary (so prefixes collide often), a budget that evicts:
    every lookup reuses what a scan of every entry finds, or less than a block short of it, and the
    entry it returns really shares those tokens."""
    import random

    from evalkit.model.prefix_cache import BLOCK

    rng = random.Random(7)
    cache = _filled(length=256)
    per_position = KVCache.bytes_per_position(SHAPE, torch.float32)
    prefixes = PrefixCache(SHAPE, torch.float32, cache.device, budget_bytes=3000 * per_position)
    stems = [[rng.randrange(4) for _ in range(rng.randrange(20, 60))] for _ in range(6)]
    for step in range(400):
        sequence = rng.choice(stems) + [rng.randrange(3) for _ in range(rng.randrange(0, 150))]
        if step % 3:
            prefixes.save(cache, 0, sequence)
            assert prefixes.nbytes <= prefixes.budget_bytes
            continue
        scan = max((common_prefix(e.tokens, torch.tensor(sequence)) for e in prefixes.entries.values()), default=0)
        scan = min(scan, len(sequence) - 1)
        entry, reuse = prefixes.lookup(sequence)
        if scan < MIN_REUSE:
            assert (entry, reuse) == (None, 0)
            continue
        assert scan - BLOCK < reuse <= scan or (entry is None and scan < MIN_REUSE + BLOCK)
        if entry is not None:
            assert entry.tokens[:reuse].tolist() == sequence[:reuse]


def test_a_zero_budget_keeps_nothing():
    prefixes = PrefixCache(SHAPE, torch.float32, torch.device("cpu"), budget_bytes=0)
    prefixes.save(_filled(), 0, list(range(50)))
    assert not prefixes.enabled and not prefixes.entries


# -- the engine on a tiny random-weight Llama (the same fused and HF paths as the embedded model) ------------------


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    from support.tiny_model import write_tiny_model

    from evalkit.model.shared import get_engine

    folder = write_tiny_model(tmp_path_factory.mktemp("tiny") / "model")
    return get_engine(str(folder), dtype="fp32", max_batch=8, device="cpu")


def _engine(master, backend: str, gb: float | None, device: str = "cpu"):
    from evalkit.model.engine import Engine

    return Engine(
        master.model, master.tokenizer, dtype="float32", max_batch=8, backend=backend, device=device, prefix_cache_gb=gb
    )


def _play(engine, sampling: SamplingArgs, questions: list[str], turns: int = 3) -> list[list]:
    """Conversations over ``turns`` turns, all questions submitted together each turn; results per turn."""
    chats = [[{"role": "system", "content": RULES}, {"role": "user", "content": q}] for q in questions]
    history = []
    for _ in range(turns):
        futures = [engine.submit(engine.encode_chat(chat), sampling) for chat in chats]
        results = [f.result() for f in futures]
        history.append(results)
        for chat, result in zip(chats, results):
            chat += [{"role": "assistant", "content": result.text}, {"role": "user", "content": "Wrong. Guess again."}]
    return history


def _same(a: list[list], b: list[list]) -> None:
    for turn_a, turn_b in zip(a, b, strict=True):
        for x, y in zip(turn_a, turn_b, strict=True):
            assert x.token_ids == y.token_ids and x.text == y.text
            torch.testing.assert_close(torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=2e-4, rtol=0)


SAMPLINGS = {
    "greedy": SamplingArgs(max_tokens=8, temperature=0),
    "seeded": SamplingArgs(max_tokens=8, temperature=1.0, seed=11),
}


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["fused", "hf"])
@pytest.mark.parametrize("mode", ["greedy", "seeded"])
def test_reuse_gives_the_results_of_a_full_prefill(master, backend: str, mode: str):
    reuse, full = _engine(master, backend, 0.5), _engine(master, backend, 0)
    try:
        with_reuse = _play(reuse, SAMPLINGS[mode], QUESTIONS)
        _same(with_reuse, _play(full, SAMPLINGS[mode], QUESTIONS))
        assert reuse.backend == backend
        stats = reuse.prefix_stats()
        assert (
            full.prefix_stats()["reused_tokens"] == 0 and stats["prompt_tokens"] == full.prefix_stats()["prompt_tokens"]
        )
        assert stats["reused_tokens"] > 2 * stats["prefilled_tokens"]  # later turns and the shared rules prompt
        last = with_reuse[-1]
        assert all(r.cached_tokens > len(r.prompt_ids) // 2 for r in last)
    finally:
        reuse.close()
        full.close()


@pytest.fixture
def fused(master):
    """A fresh fused-path engine with a 0.5 GB prefix cache, closed after the test."""
    engine = _engine(master, "fused", 0.5)
    yield engine
    engine.close()


@pytest.mark.slow
def test_reuse_alone_equals_reuse_batched(fused):
    batched = _play(fused, SAMPLINGS["seeded"], QUESTIONS)
    alone = [_play(fused, SAMPLINGS["seeded"], [q]) for q in QUESTIONS]
    _same(batched, [[alone[i][turn][0] for i in range(len(QUESTIONS))] for turn in range(3)])


@pytest.mark.slow
def test_a_group_prefills_its_shared_prompt_once(fused):
    prompt = fused.encode_chat([{"role": "system", "content": RULES}, {"role": "user", "content": QUESTIONS[0]}])
    results = fused.generate_many([prompt] * 4, SamplingArgs(max_tokens=2, temperature=1.0, seed=3))
    stats = fused.prefix_stats()
    assert stats["prefilled_tokens"] == len(prompt) + 3 and stats["reused_tokens"] == 3 * (len(prompt) - 1)
    assert [r.cached_tokens for r in results] == [0] + [len(prompt) - 1] * 3


@pytest.mark.slow
def test_a_weight_update_empties_the_prefix_cache(fused):
    prompt = fused.encode_chat([{"role": "system", "content": RULES}, {"role": "user", "content": QUESTIONS[1]}])
    fused.generate_many([prompt], SamplingArgs(max_tokens=2, temperature=0))
    assert fused.prefix_stats()["entries"] > 0
    fused.update_weights()
    assert fused.prefix_stats()["entries"] == 0
    result = fused.generate_many([prompt], SamplingArgs(max_tokens=2, temperature=0))[0]
    assert result.cached_tokens == 0


@pytest.mark.slow
def test_the_prefix_cache_stays_within_its_bound(master):
    per_position = KVCache.bytes_per_position(master._forward.cache_shape, torch.float32)
    engine = _engine(master, "fused", 200 * per_position / 2**30)
    try:
        for question in QUESTIONS:
            engine.generate_many(
                [engine.encode_chat([{"role": "user", "content": question * 8}])], SamplingArgs(max_tokens=2)
            )
            assert 0 < engine.prefix_stats()["cache_bytes"] <= 200 * per_position
    finally:
        engine.close()


@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("backend", ["fused", "hf"])
def test_reuse_on_cuda_gives_the_results_of_a_full_prefill(master, backend: str):
    reuse, full = _engine(master, backend, 0.5, "cuda"), _engine(master, backend, 0, "cuda")
    try:
        for sampling in SAMPLINGS.values():
            _same(_play(reuse, sampling, QUESTIONS), _play(full, sampling, QUESTIONS))
        assert reuse.prefix_stats()["reused_tokens"] > 0
    finally:
        reuse.close()
        full.close()
