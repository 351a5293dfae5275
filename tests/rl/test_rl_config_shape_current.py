"""prime-rl's current config shape (the commit the export pins): ``group_size``, ``[orchestrator.algo]``,
``[[orchestrator.train.source]]`` with ``env.taskset`` / ``env.<agent>.harness`` / ``runtime`` and its own ``algo``,
``[orchestrator.train.sampling] max_completion_tokens``, ``[[orchestrator.eval.source]]``, ``[monitors.wandb]``,
``[orchestrator.renderer]``, ``[inference.vllm]``: read as primekit's keys, the rest refused by name.

The configs below are written in the shape of prime-rl's own ``configs/debug/algo/*.toml`` (not copies)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalkit.core.errors import ConfigError
from primekit_cli.app import app
from rl_backend.config import load_rl_config


def _source(name: str, taskset: str, extra: str = "", table: str = "train", seats: tuple[str, ...] = ("agent",)) -> str:
    text = (f'[[orchestrator.{table}.source]]\nname = "{name}"\n'
            f'[orchestrator.{table}.source.env.taskset]\nid = "{taskset}"\n')
    for seat in seats:
        text += (f'[orchestrator.{table}.source.env.{seat}.harness]\nid = "null"\n'
                 f'[orchestrator.{table}.source.env.{seat}.runtime]\ntype = "subprocess"\n')
    return text + extra


def _config(algo: str, sources: str, group_size: int = 4, tokens: int = 64) -> str:
    return f'''max_steps = 3
seq_len = 1024
[model]
name = "local/smollm2-135m"
[monitors.wandb]
project = "algorithms-debug"
name = "debug"
[orchestrator]
batch_size = 8
group_size = {group_size}
[orchestrator.algo]
{algo}
[orchestrator.renderer]
name = "auto"
[orchestrator.train.sampling]
max_completion_tokens = {tokens}
{sources}
[orchestrator.eval]
interval = 1
num_examples = 8
[orchestrator.eval.sampling]
max_completion_tokens = {tokens}
{_source("reverse-text", "reverse-text", table="eval")}
[trainer.optim]
lr = 3e-6
[ckpt]
[inference]
[inference.vllm]
gpu_memory_utilization = 0.5
'''


def _load(tmp_path: Path, text: str):
    path = tmp_path / "rl.toml"
    path.write_text(text)
    tomllib.loads(text)  # the test's own config is valid TOML
    return load_rl_config(path)


def test_grpo_shape_maps_onto_primekit_keys(tmp_path):
    config = _load(tmp_path, _config('type = "grpo"', _source("reverse-text", "reverse-text")))
    assert config.model == "local/smollm2-135m" and config.rollouts_per_example == 4 and config.batch_size == 8
    assert config.sampling.max_tokens == 64 and config.trainer.max_seq_len == 1024 and config.trainer.lr == 3e-6
    assert [(e.id, e.label) for e in config.env] == [("reverse-text", "reverse-text")]
    assert [e.id for e in config.eval.env] == ["reverse-text"] and config.eval.interval == 1
    assert config.wandb.project == "algorithms-debug" and config.wandb.name == "debug"
    assert config.inference.gpu_memory_utilization == 0.5 and config.algo.type == "grpo"
    assert any("orchestrator.renderer.name" in n for n in config.notes)
    # prime-rl's default loss at this shape is DPPO + KL, so the config means the same here
    assert config.trainer.loss.type == "dppo" and config.trainer.loss.knobs() == {
        "dppo_mask_low": 0.2, "dppo_mask_high": 0.2, "adv_tau": 1.0, "kl_tau": 1e-3}


def test_default_loss_knobs_carry(tmp_path):
    text = _config('type = "grpo"', _source("reverse-text", "reverse-text")) + \
        '[trainer.loss]\ntype = "default"\ndppo_mask_high = 0.1\nkl_tau = 0.0\n'
    config = _load(tmp_path, text.replace("[trainer.optim]\nlr = 3e-6\n", "[trainer.optim]\nlr = 3e-6\n", 1))
    loss = config.trainer.loss
    assert loss.type == "dppo" and loss.dppo_mask_high == 0.1 and loss.kl_tau == 0


def test_per_source_algo_and_taskset_args(tmp_path):
    sources = (_source("math", "reverse-text") +
               _source("sort", "alphabet-sort", '[orchestrator.train.source.algo]\ntype = "max_rl"\n')
               .replace('id = "alphabet-sort"\n', 'id = "alphabet-sort"\nmin_turns = 3\nmax_turns = 5\n'))
    config = _load(tmp_path, _config('type = "rae"\ndecay = 0.9', sources))
    assert config.algo.type == "rae" and config.algo.decay == 0.9
    assert [(e.label, e.algo.type if e.algo else None) for e in config.env] == [("math", None), ("sort", "max_rl")]
    assert config.env[1].args == {"min_turns": 3, "max_turns": 5}
    assert config.algo_of(config.env[0]).type == "rae" and config.algo_of(config.env[1]).type == "max_rl"


def test_multi_seat_rae_with_group_size_one_plans(tmp_path):
    text = _config('type = "rae"', _source("kuhn-poker", "kuhn-poker", seats=("player0", "player1")), group_size=1)
    path = tmp_path / "rl.toml"
    path.write_text(text)
    result = CliRunner().invoke(app, ["rl", "run", str(path), "--dry-run", "-o", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert "algorithm    rae (rl on sampled tokens), decay 0.95" in result.output
    assert "8 x 1), max_tokens 64" in result.output.replace("examples ", "")


@pytest.mark.parametrize("algo, sources, needle", [
    ('type = "grpo"', _source("kuhn-poker", "kuhn-poker"), None),  # fine; group_size 1 below refuses
    ('type = "opd"\n[orchestrator.algo.teacher]\nname = "teacher"\nbase_url = "http://127.0.0.1:9/v1"',
     _source("reverse-text", "reverse-text"), "algorithm    opd (ref_kl on sampled tokens), teacher teacher at "),
    ('type = "grpo"', _source("reverse-text", "reverse-text") + _source(
        "reverse-text-opd", "reverse-text", '[orchestrator.train.source.algo]\ntype = "opd"\n'
        '[orchestrator.train.source.algo.teacher]\nname = "teacher"\nbase_url = "http://127.0.0.1:9/v1"\n'),
     "             reverse-text-opd: opd (ref_kl on sampled tokens), teacher teacher at http://127.0.0.1:9/v1"),
])
def test_distillation_plans_name_the_teacher(tmp_path, algo, sources, needle):
    """opd plans (the teacher is checked when the run starts, before any rollout); group_size 1 stops grpo."""
    path = tmp_path / "rl.toml"
    path.write_text(_config(algo, sources, group_size=1 if needle is None else 4))
    result = CliRunner().invoke(app, ["rl", "run", str(path), "--dry-run", "-o", str(tmp_path / "o")])
    assert result.exit_code == (2 if needle is None else 0), result.output
    assert (needle or "rollouts_per_example (group_size) = 1 leaves algo.type 'grpo' no siblings") in result.output


@pytest.mark.parametrize("edit, needle", [
    (('id = "null"', 'id = "bash"'),
     "env.agent.harness = {'id': 'bash'}: prime-rl harness with no primekit counterpart"),
    (('type = "subprocess"', 'type = "docker"'), "env.agent.runtime = {'type': 'docker'}: prime-rl runtime"),
    (("[orchestrator.eval.sampling]\nmax_completion_tokens = 64",
      "[orchestrator.eval.sampling]\nmax_completion_tokens = 9"),
     "orchestrator.eval.sampling.max_completion_tokens = 9: primekit's periodic evals sample with the training"),
    (("gpu_memory_utilization = 0.5", "gpu_memory_utilization = 0.5\nkv_cache_dtype = \"fp8\""),
     "inference.vllm.kv_cache_dtype: prime-rl key with no primekit counterpart"),
    (('[monitors.wandb]', '[monitors.wandb]\noffline = true'),
     "monitors.wandb.offline: prime-rl key with no primekit counterpart"),
    (('name = "reverse-text"\n', 'name = "reverse-text"\ngroup_size = 2\n', 1),
     "orchestrator.train.source[0].group_size: prime-rl source key with no primekit counterpart"),
])
def test_keys_with_no_counterpart_are_refused_by_name(tmp_path, edit, needle):
    text = _config('type = "grpo"', _source("reverse-text", "reverse-text")).replace(*edit)
    with pytest.raises(ConfigError, match=None) as info:
        _load(tmp_path, text)
    assert needle in str(info.value)
