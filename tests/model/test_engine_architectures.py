"""The engine on architectures beyond Llama: tiny random-weight models built from configs here.

Each must pick the right forward (fused for the Llama family, the Hugging Face fallback for the
rest), batch without changing greedy tokens, and report logprobs a separate plain transformers
forward agrees with. Also: weight updates and LoRA on the fallback, decode windows longer than
one step, and (GPU only) the CUDA-graph path against the eager one.

Marked slow: the tokenizer is the embedded SmolLM2's (converted once on a fresh machine).
"""

from __future__ import annotations

import asyncio

import pytest
import torch
from support.tiny_archs import build_arch as _build

from evalkit.core.types import SamplingArgs

pytestmark = pytest.mark.slow

GREEDY = SamplingArgs(max_tokens=10, temperature=0, extra={"ignore_eos": True})
PROMPTS = [
    [1, 400, 401, 402],
    [1, 500, 9, 9, 9, 9, 9, 33, 34, 35, 36],
    [1, 7],
    [1, 1000, 2000, 3000, 4000, 5000],
    [1, 42, 43],
]


@pytest.fixture(scope="module")
def tokenizer():
    from evalkit.core.defaults import DEFAULT_MODEL
    from evalkit.model.loading import _load_tokenizer, ensure_chat_template, ensure_converted
    from evalkit.model.registry import KNOWN_MODELS

    loaded = _load_tokenizer(ensure_converted(KNOWN_MODELS[DEFAULT_MODEL]))
    ensure_chat_template(loaded)
    return loaded


def _engine(model, tokenizer, **kwargs):
    from evalkit.model.engine import Engine

    options = {"dtype": "fp32", "max_batch": 8, "name": "tiny", "device": "cpu", **kwargs}
    return Engine(model, tokenizer, **options)


def _forward_logprobs(model, prompt: list[int], completion: list[int]) -> torch.Tensor:
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
    return torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(completion)[:, None]).squeeze(-1)


def _check_against_transformers(engine, model) -> None:
    futures = [engine.submit(p, GREEDY) for p in PROMPTS]
    together = [f.result(timeout=120) for f in futures]
    alone = [engine.generate_many([p], GREEDY)[0] for p in PROMPTS]
    assert [r.token_ids for r in together] == [r.token_ids for r in alone]
    for result, prompt in zip(together, PROMPTS):
        assert len(result.token_ids) == GREEDY.max_tokens
        expected = _forward_logprobs(model, prompt, result.token_ids)
        assert torch.allclose(torch.tensor(result.logprobs), expected, atol=1e-4), (result.logprobs, expected)
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([prompt + result.token_ids])).logits[0, len(prompt) - 1 : -1]
        assert logits.argmax(-1).tolist() == result.token_ids


@pytest.mark.parametrize(
    "kind, backend",
    [("qwen2", "fused"), ("llama3-rope", "fused"), ("mistral", "fused"), ("qwen3", "hf"), ("gemma", "hf"),
     ("gemma2", "hf"), ("mistral-window", "hf"), ("phi3", "hf")],  # fmt: skip
)
def test_each_architecture_matches_transformers(tokenizer, kind: str, backend: str):
    model = _build(kind)
    engine = _engine(model, tokenizer)
    try:
        assert engine.backend == backend
        _check_against_transformers(engine, model)
    finally:
        engine.close()


def test_llama_on_the_fallback_matches_the_fused_path(tokenizer):
    model = _build("llama")
    fused, fallback = _engine(model, tokenizer), _engine(model, tokenizer, backend="hf")
    try:
        assert (fused.backend, fallback.backend) == ("fused", "hf")
        a, b = fused.generate_many(PROMPTS, GREEDY), fallback.generate_many(PROMPTS, GREEDY)
        assert [r.token_ids for r in a] == [r.token_ids for r in b]
        assert torch.allclose(torch.tensor([r.logprobs for r in a]), torch.tensor([r.logprobs for r in b]), atol=1e-4)
    finally:
        fused.close()
        fallback.close()


def test_fused_backend_refuses_what_it_cannot_run(tokenizer):
    from evalkit.core.errors import UserError

    with pytest.raises(UserError, match="architecture 'qwen3'"):
        _engine(_build("qwen3"), tokenizer, backend="fused")


def test_fallback_weight_updates_and_lora(tokenizer):
    peft = pytest.importorskip("peft")
    model = _build("qwen3", seed=0)
    engine = _engine(model, tokenizer)
    reference = _engine(_build("qwen3", seed=1), tokenizer)
    try:
        before = engine.generate_many(PROMPTS[:2], GREEDY)
        assert engine.update_weights(_build("qwen3", seed=1).state_dict()) == 1
        after = engine.generate_many(PROMPTS[:2], GREEDY)
        assert [r.token_ids for r in after] == [r.token_ids for r in reference.generate_many(PROMPTS[:2], GREEDY)]
        assert [r.token_ids for r in after] != [r.token_ids for r in before] and after[0].weights_version == 1
        config = peft.LoraConfig(
            r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"], init_lora_weights=False
        )
        wrapped = peft.get_peft_model(model, config)
        with torch.no_grad():
            for name, param in wrapped.named_parameters():
                if "lora_B" in name:
                    param.mul_(50.0)
        engine.update_weights()
        lora = engine.generate_many(PROMPTS[:2], GREEDY)
        assert [r.token_ids for r in lora] != [r.token_ids for r in after]
        for result, prompt in zip(lora, PROMPTS[:2]):
            assert torch.allclose(
                torch.tensor(result.logprobs), _forward_logprobs(wrapped, prompt, result.token_ids), atol=1e-4
            )
    finally:
        engine.close()
        reference.close()


def test_sampled_logprobs_are_of_the_tempered_distribution_on_the_fallback(tokenizer):
    model = _build("gemma")
    engine = _engine(model, tokenizer)
    try:
        args = SamplingArgs(max_tokens=6, temperature=0.7, seed=3, extra={"ignore_eos": True})
        result = engine.generate_many(PROMPTS[:1], args)[0]
        ids = torch.tensor([PROMPTS[0] + result.token_ids])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, len(PROMPTS[0]) - 1 : -1].float()
        expected = torch.log_softmax(logits / 0.7, -1).gather(-1, torch.tensor(result.token_ids)[:, None]).squeeze(-1)
        assert torch.allclose(torch.tensor(result.logprobs), expected, atol=1e-4)
    finally:
        engine.close()


def test_generate_many_queues_its_prompts_in_one_step(tokenizer):
    """One by one, the worker could wake on the first prompt and start it alone (on a GPU: a window
    of steps and a graph capture for that odd batch); queued in one step, they are admitted together."""
    engine = _engine(_build("llama"), tokenizer)
    woken_with: list[int] = []
    notify = engine._cond.notify_all

    def recording_notify() -> None:
        woken_with.append(len(engine._pending))
        notify()

    engine._cond.notify_all = recording_notify
    try:
        results = engine.generate_many(PROMPTS, GREEDY)
        assert woken_with == [len(PROMPTS)] and [len(r.token_ids) for r in results] == [10] * len(PROMPTS)
    finally:
        engine._cond.notify_all = notify
        engine.close()


@pytest.mark.parametrize("kind", ["llama", "qwen3"])
def test_decode_windows_give_the_same_results_as_single_steps(tokenizer, kind: str):
    """The host reads tokens every ``window`` steps (the CUDA setting) -- same tokens, same stops."""
    model = _build(kind)
    probe = _engine(model, tokenizer)
    try:
        stop_id = probe.generate_many(PROMPTS, GREEDY)[1].token_ids[5]  # sampled mid-way: this test's EOS
    finally:
        probe.close()
    model.generation_config.eos_token_id = stop_id
    # window=4 with bucketed rows/lengths: the CUDA-graph layout (padding rows, fixed lengths), run eagerly
    step, windowed = _engine(model, tokenizer), _engine(model, tokenizer, window=4, bucketed=True)
    try:
        assert step.stop_token_ids >= {stop_id} and windowed._limits.window == 4 and windowed._bucketed
        mixed = [
            SamplingArgs(max_tokens=n, temperature=t, seed=9) for n, t in zip([3, 10, 7, 9, 1], [0, 0, 1.0, 0.8, 0])
        ]
        results = []
        for engine in (step, windowed):
            futures = [engine.submit(p, a) for p, a in zip(PROMPTS, mixed)]
            results.append([f.result(timeout=120) for f in futures])
        a, b = results
        assert [(r.token_ids, r.finish_reason) for r in a] == [(r.token_ids, r.finish_reason) for r in b]
        assert torch.allclose(
            torch.tensor(sum((r.logprobs for r in a), [])), torch.tensor(sum((r.logprobs for r in b), [])), atol=1e-5
        )
        assert a[1].finish_reason == "stop" and a[1].token_ids[-1] == stop_id and len(a[1].token_ids) <= 6
        assert len(a[4].token_ids) == 1 and a[0].finish_reason in ("stop", "length")
    finally:
        step.close()
        windowed.close()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("kind", ["llama", "qwen3"])
def test_cuda_engine_matches_cpu(tokenizer, kind: str):
    """On a GPU: graphs (fused) or eager (fallback), windows of 16 steps, device sampling -- the
    same greedy tokens as the CPU engine and logprobs within fp32 noise; seeded sampling too."""
    model = _build(kind)
    cpu, cuda = _engine(model, tokenizer), _engine(model, tokenizer, device="cuda")
    try:
        assert cuda.device.type == "cuda" and (cuda._graphs == (kind == "llama"))
        a, b = cpu.generate_many(PROMPTS, GREEDY), cuda.generate_many(PROMPTS, GREEDY)
        assert [r.token_ids for r in a] == [r.token_ids for r in b]
        assert torch.allclose(torch.tensor([r.logprobs for r in a]), torch.tensor([r.logprobs for r in b]), atol=1e-3)
        # seeded sampling: reproducible on the GPU, logprobs those of a plain forward (CPU and GPU
        # numerics may differ in the last bits, which can move a draw that sits on a boundary)
        seeded = SamplingArgs(max_tokens=10, temperature=1.0, seed=4, extra={"ignore_eos": True})
        first, again = cuda.generate_many(PROMPTS, seeded), cuda.generate_many(PROMPTS, seeded)
        assert [r.token_ids for r in first] == [r.token_ids for r in again]
        for result, prompt in zip(first, PROMPTS):
            assert torch.allclose(
                torch.tensor(result.logprobs), _forward_logprobs(model, prompt, result.token_ids), atol=1e-3
            )
        # past 64 positions the K/V cache grows: the graphs are captured again (into a new pool),
        # not given up for eager steps, and what they sample is still the plain forward's
        grown = cuda._scheduler.cache.generation
        longer = SamplingArgs(max_tokens=70, temperature=0, extra={"ignore_eos": True})
        for result, prompt in zip(cuda.generate_many(PROMPTS, longer), PROMPTS):
            assert len(result.token_ids) == 70
            assert torch.allclose(
                torch.tensor(result.logprobs), _forward_logprobs(model, prompt, result.token_ids), atol=1e-3
            )
        assert cuda._scheduler.cache.generation > grown and cuda._scheduler.stepper.graphs == (kind == "llama")
        for engine in (cpu, cuda):
            engine.update_weights(_build(kind, seed=5).state_dict())
        assert [r.token_ids for r in cpu.generate_many(PROMPTS, GREEDY)] == [
            r.token_ids for r in cuda.generate_many(PROMPTS, GREEDY)
        ]
    finally:
        cpu.close()
        cuda.close()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_uniforms_hash_identically_on_cuda():
    from evalkit.model.sampling import uniforms

    seeds = torch.tensor([0, 1, -5, 2**62 + 7, 2**63 - 1]).repeat_interleave(4)
    counters = torch.tensor([0, 1, 99, 2**40]).repeat(5)
    assert uniforms(seeds, counters).tolist() == uniforms(seeds.cuda(), counters.cuda()).cpu().tolist()


def test_a_hub_id_loads_offline_from_the_hf_cache(tokenizer, tmp_path, monkeypatch):
    """``hf/org/name`` and a bare ``org/name``: a tiny Qwen3 laid out as ``hf download`` leaves it."""
    from evalkit.clients.local import LocalClient
    from evalkit.model.engine import Engine

    commit = "89abcdef" * 5
    repo = tmp_path / "hub" / "models--tiny-org--tiny-qwen3"
    snapshot = repo / "snapshots" / commit
    model = _build("qwen3")
    model.save_pretrained(snapshot)
    tokenizer.save_pretrained(snapshot)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    engine = Engine.from_name("hf/tiny-org/tiny-qwen3", dtype="fp32", max_batch=2, device="cpu")
    try:
        assert engine.backend == "hf" and engine.name == "hf/tiny-org/tiny-qwen3" and engine.tokenizer.chat_template
        result = engine.generate_many(PROMPTS[:1], GREEDY)[0]
        assert torch.allclose(
            torch.tensor(result.logprobs), _forward_logprobs(model, PROMPTS[0], result.token_ids), atol=1e-4
        )
    finally:
        engine.close()
    client = LocalClient("tiny-org/tiny-qwen3", dtype="fp32", device="cpu")
    completion = asyncio.run(
        client.chat([{"role": "user", "content": "hi"}], SamplingArgs(max_tokens=3, temperature=0))
    )
    assert len(completion.completion_token_ids) <= 3 and completion.logprobs
    assert client.engine.device.type == "cpu"


class _FakeCuda:
    """Stands in for the parts of ``torch.cuda`` the stepper's graph path calls, with graph
    semantics: capturing records a step without running it; replaying runs it on whatever the
    captured tensors hold then, and fails if the tensors it captured were since reallocated."""

    def __init__(self, stepper_class, fail_capture: bool = False):
        self.captured: list[tuple] = []
        self.replays = 0
        fake = self

        class Graph:
            def replay(self):
                stepper, args, tensors = self.recorded
                assert tensors == [id(t) for t in stepper.cache.k], "replayed a graph over a reallocated cache"
                fake.replays += 1
                fake.real_step(stepper, *args)

        class Capture:
            def __init__(self, graph, pool=None, capture_error_mode="global"):
                self.graph = graph

            def __enter__(self):
                if fail_capture:
                    raise RuntimeError("operation not permitted when stream is capturing")
                fake.capturing = self.graph

            def __exit__(self, *exc):
                fake.capturing = None

        self.real_step = stepper_class._step
        self.capturing = None

        def step(stepper, *args):
            if fake.capturing is not None:
                fake.capturing.recorded = (stepper, args, [id(t) for t in stepper.cache.k])
                fake.captured.append(args)
                return
            fake.real_step(stepper, *args)

        self.step = step
        self.Graph, self.Capture = Graph, Capture


class _Stream:
    def wait_stream(self, other):
        pass


@pytest.mark.parametrize("fail_capture", [False, True])
def test_graph_path_logic_with_a_simulated_cuda(tokenizer, monkeypatch, fail_capture: bool):
    """Graph capture and replay as the CUDA path does it (warm-up that leaves no trace, one graph
    per bucket/length/mode, none reused after the cache grows; a failed capture falls back to
    eager steps), simulated on CPU: same tokens as the plain engine."""
    import contextlib

    from evalkit.model import stepper as stepper_module

    fake = _FakeCuda(stepper_module.DecodeStepper, fail_capture)
    monkeypatch.setattr(stepper_module.DecodeStepper, "_step", fake.step)
    for name, value in {"CUDAGraph": fake.Graph, "graph": fake.Capture, "Stream": lambda *a: _Stream(),
                        "current_stream": lambda *a: _Stream(), "stream": lambda s: contextlib.nullcontext(),
                        "graph_pool_handle": lambda: object()}.items():  # fmt: skip
        monkeypatch.setattr(torch.cuda, name, value)
    model = _build("llama")
    plain = _engine(model, tokenizer, window=4, bucketed=True)  # the same shapes, so the same numerics
    graphed = _engine(model, tokenizer, window=4)
    try:
        graphed.close()  # rebuild its worker with graphs on (there is no real CUDA device here)
        graphed._closed, graphed._graphs = False, True
        graphed._thread = __import__("threading").Thread(target=graphed._run, daemon=True)
        graphed._thread.start()
        long_args = SamplingArgs(max_tokens=70, temperature=0.9, seed=2, extra={"ignore_eos": True})
        for args in (GREEDY, long_args):  # 70 tokens: the cache outgrows 64 positions mid-way
            a, b = plain.generate_many(PROMPTS, args), graphed.generate_many(PROMPTS, args)
            assert [r.token_ids for r in a] == [r.token_ids for r in b]
        if fail_capture:
            assert fake.captured == [] and fake.replays == 0
        else:
            assert len(fake.captured) >= 3 and fake.replays > len(fake.captured)
            assert len({(rows, length) for rows, length, _ in fake.captured}) >= 2
    finally:
        plain.close()
        graphed.close()


@pytest.mark.parametrize(
    "kind, backend", [("llama", "fused"), ("qwen3", "hf"), ("gemma2", "hf"), ("mistral-window", "hf"), ("phi3", "hf")]
)
def test_prefix_reuse_matches_transformers(tokenizer, kind: str, backend: str):
    """A conversation's next turn reuses the K/V of the last one (prefill and decode steps, sliding
    windows and soft-capping included) and still gets a plain forward's greedy tokens and logprobs."""
    model = _build(kind)
    engine = _engine(model, tokenizer)
    try:
        assert engine.backend == backend
        first = [1] + list(range(300, 340))
        turn = engine.generate_many([first], GREEDY)[0]
        prompts = [first + turn.token_ids + [7, 8, 9], first + [11, 12]]  # the next turn, and a sibling of the first
        results = [f.result(timeout=120) for f in [engine.submit(p, GREEDY) for p in prompts]]
        assert [r.cached_tokens for r in results] == [len(first) + len(turn.token_ids) - 1, len(first)]
        for result, prompt in zip(results, prompts):
            expected = _forward_logprobs(model, prompt, result.token_ids)
            assert torch.allclose(torch.tensor(result.logprobs), expected, atol=1e-4), (result.logprobs, expected)
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([prompt + result.token_ids])).logits[0, len(prompt) - 1 : -1]
            assert logits.argmax(-1).tolist() == result.token_ids
    finally:
        engine.close()
