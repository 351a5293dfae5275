"""The engine built from a model folder's safetensors (no transformers module) against the engine built from the module.

``Engine.from_name`` reads its snapshot straight from ``model.safetensors`` and builds the
transformers module only when something asks for ``engine.model``. These check that both sources
give the same snapshot, RoPE tables and logits, that serving never builds (nor imports) the module,
and that a weight update on such an engine builds it and works.

Marked slow: the tokenizer is the embedded SmolLM2's (converted once on a fresh machine), and the
last test runs a real eval on the embedded model in a subprocess.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from support import REPO, with_pythonpath
from support.tiny_archs import build_arch

from evalkit.core.types import SamplingArgs

pytestmark = pytest.mark.slow

GREEDY = SamplingArgs(max_tokens=8, temperature=0, extra={"ignore_eos": True})
PROMPTS = [[1, 400, 401, 402], [1, 500, 9, 9, 9, 33, 34], [1, 7]]


@pytest.fixture(scope="module")
def tokenizer():
    from evalkit.core.defaults import DEFAULT_MODEL
    from evalkit.model.loading import _load_tokenizer, ensure_chat_template, ensure_converted
    from evalkit.model.registry import KNOWN_MODELS

    loaded = _load_tokenizer(ensure_converted(KNOWN_MODELS[DEFAULT_MODEL]))
    ensure_chat_template(loaded)
    return loaded


def _never_built():
    raise AssertionError("the transformers module was built")


def _saved(kind: str, folder, seed: int = 0):
    """(module, StoredModel of the same weights saved to ``folder``); the stored model refuses to build its module."""
    from evalkit.model.loading import _stored_config
    from evalkit.model.tensors import StoredModel

    module = build_arch(kind, seed)
    module.save_pretrained(folder)
    return module, StoredModel(folder, _stored_config(folder, embedded=False), _never_built)


def _engine(model, tokenizer):
    from evalkit.model.engine import Engine

    return Engine(model, tokenizer, dtype="fp32", max_batch=4, name="tiny", device="cpu")


@pytest.mark.parametrize("kind", ["llama", "qwen2", "mistral", "llama3-rope", "linear-rope", "yarn-rope"])
def test_stored_weights_give_the_snapshot_and_logits_of_the_module(tokenizer, tmp_path, kind):
    from evalkit.model.weights import DecoderWeights, fused_unsupported, rope_tables

    module, stored = _saved(kind, tmp_path)
    assert fused_unsupported(stored) is None and fused_unsupported(module) is None
    for a, b in zip(
        DecoderWeights.build(module, torch.float32).tensors(),
        DecoderWeights.build(stored, torch.float32).tensors(),
        strict=True,
    ):
        assert (a is None and b is None) or torch.equal(a, b)
    for a, b in zip(rope_tables(module, 256, torch.float32, "cpu"), rope_tables(stored, 256, torch.float32, "cpu")):
        assert torch.equal(a, b)
    from_module, from_file = _engine(module, tokenizer), _engine(stored, tokenizer)
    try:
        expected, got = from_module.generate_many(PROMPTS, GREEDY), from_file.generate_many(PROMPTS, GREEDY)
        assert [r.token_ids for r in got] == [r.token_ids for r in expected]
        assert [r.logprobs for r in got] == [r.logprobs for r in expected]  # the same logits, bit for bit
        assert from_file.stop_token_ids == from_module.stop_token_ids and from_file.backend == "fused"
        assert not stored.built
    finally:
        from_module.close()
        from_file.close()


@pytest.mark.parametrize("kind", ["qwen3", "mistral-window", "gemma"])
def test_a_stored_model_the_fused_path_cannot_run_is_refused_for_the_same_reason(tmp_path, kind):
    from evalkit.model.weights import fused_unsupported

    module, stored = _saved(kind, tmp_path)
    assert fused_unsupported(stored) == fused_unsupported(module) is not None


def test_an_engine_from_a_folder_builds_the_module_only_when_asked_and_updates_its_weights(tmp_path):
    from evalkit.model.engine import Engine

    build_arch("llama", seed=0).save_pretrained(tmp_path / "a")
    build_arch("llama", seed=1).save_pretrained(tmp_path / "b")
    engine = Engine.from_name(str(tmp_path / "a"), dtype="fp32", max_batch=4, device="cpu")
    reference = Engine.from_name(str(tmp_path / "b"), dtype="fp32", max_batch=4, device="cpu")
    try:
        before = engine.generate_many(PROMPTS, GREEDY)
        assert not engine._model.built
        assert engine.update_weights(build_arch("llama", seed=1).state_dict()) == 1
        assert engine._model.built and engine.model.config._name_or_path == str(tmp_path / "a")
        after, expected = engine.generate_many(PROMPTS, GREEDY), reference.generate_many(PROMPTS, GREEDY)
        assert [r.token_ids for r in after] == [r.token_ids for r in expected] != [r.token_ids for r in before]
    finally:
        engine.close()
        reference.close()


def test_the_embedded_cache_reads_as_transformers_reads_it():
    """Its config as a plain namespace and its tokenizer's class loaded directly (both skip ~0.6 s of
    transformers imports) give what AutoConfig and AutoTokenizer give."""
    from transformers import AutoConfig, AutoTokenizer

    from evalkit.core.defaults import DEFAULT_MODEL
    from evalkit.model.loading import _load_cached_tokenizer, _stored_config, ensure_converted
    from evalkit.model.registry import KNOWN_MODELS
    from evalkit.model.tensors import StoredModel
    from evalkit.model.weights import DecoderShape, fused_unsupported, rope_tables

    folder = ensure_converted(KNOWN_MODELS[DEFAULT_MODEL])
    plain, full = (
        StoredModel(folder, config, _never_built)
        for config in (_stored_config(folder, embedded=True), AutoConfig.from_pretrained(folder))
    )
    assert type(plain.config).__name__ == "SimpleNamespace"
    assert DecoderShape.from_config(plain.config) == DecoderShape.from_config(full.config)
    assert fused_unsupported(plain) is None and fused_unsupported(full) is None
    assert plain.generation_config == full.generation_config
    for a, b in zip(rope_tables(plain, 512, torch.float32, "cpu"), rope_tables(full, 512, torch.float32, "cpu")):
        assert torch.equal(a, b)
    direct, auto = _load_cached_tokenizer(folder), AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    assert type(direct) is type(auto)
    chat = [{"role": "user", "content": "Reverse 'hello, world' ... and café!"}]
    assert direct.apply_chat_template(chat, add_generation_prompt=True) == auto.apply_chat_template(
        chat, add_generation_prompt=True
    )
    assert (direct.eos_token_id, direct.pad_token_id, direct.unk_token_id) == (
        auto.eos_token_id,
        auto.pad_token_id,
        auto.unk_token_id,
    )


def test_unreadable_weights_are_a_user_error(tmp_path):
    from evalkit.core.errors import UserError
    from evalkit.model.engine import Engine

    build_arch("llama").save_pretrained(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(UserError, match="cannot read the weights in"):
        Engine.from_name(str(tmp_path), dtype="fp32", max_batch=2, device="cpu")


REPORT_IMPORTS = """
import atexit, runpy, sys
def report():
    built = [m for m in sys.modules if m.startswith("transformers.models.") and ".modeling_" in m]
    print("modeling modules:", built, file=sys.stderr)
atexit.register(report)
sys.argv = ["prime", *sys.argv[1:]]
runpy.run_module("primekit_cli", run_name="__main__")
"""


def test_an_eval_on_the_embedded_model_never_builds_the_transformers_module(tmp_path):
    """Not even its modeling code is imported: the module cannot have been built without it."""
    env = with_pythonpath(REPO) | {"HF_HUB_OFFLINE": "1"}
    args = [
        "eval",
        "run",
        "reverse-text",
        "-m",
        "local/smollm2-135m",
        "-n",
        "1",
        "-r",
        "1",
        "-t",
        "4",
        "-o",
        str(tmp_path / "out"),
    ]
    done = subprocess.run(
        [sys.executable, "-c", REPORT_IMPORTS, *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "modeling modules: []" in done.stderr, done.stderr[-2000:]


def test_a_tied_output_projection_shares_the_embedding_copy_until_an_update_unties_it(monkeypatch):
    """Tied: one copy serves both. A LoRA on lm_head unties them; the update then replaces the
    snapshot instead of writing the head into the shared embedding. (Unpacked linears, as on CUDA
    and AVX2 CPUs in fp32: a packed head holds its own copy anyway.)"""
    peft = pytest.importorskip("peft")
    from evalkit.model import weights
    from evalkit.model.forward import LlamaForward

    monkeypatch.setattr(weights, "packing_pays", lambda dtype, device: False)
    model = build_arch("qwen2")  # tied
    forward = LlamaForward(model, torch.float32)
    assert forward.weights.lm_head.weight is forward.weights.embed
    embed = model.get_input_embeddings().weight.detach().clone()
    wrapped = peft.get_peft_model(model, peft.LoraConfig(r=2, target_modules=["lm_head"], init_lora_weights=False))
    forward.load(wrapped)
    assert forward.weights.lm_head.weight is not forward.weights.embed
    assert torch.equal(forward.weights.embed, embed)
    head = wrapped.get_base_model().lm_head
    assert torch.allclose(forward.weights.lm_head.weight, head.base_layer.weight + head.get_delta_weight("default"))
