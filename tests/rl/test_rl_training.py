"""End-to-end CPU training on a tiny random-weight model: finite loss, checkpoint layout, resume.

The environment rewards the fraction of digits in the reply, so even random weights produce groups
with different rewards (a learning signal) and the baseline checks pass.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest
import torch
from support.rl_project import read_metrics, rl_project
from typer.testing import CliRunner

from evalkit.core.types import SamplingArgs
from primekit_cli.app import app
from rl_backend.config import RLConfig


@pytest.mark.slow
def test_two_steps_then_resume_to_three(tmp_path, tiny_model):
    config = rl_project(tmp_path, tiny_model)
    out = tmp_path / "out"
    runner = CliRunner()
    result = runner.invoke(app, ["rl", "run", str(config), "-o", str(out)])
    assert result.exit_code == 0, result.output
    run_dir = out / "rl" / "t"
    baseline = json.loads((run_dir / "baseline.json").read_text())
    assert baseline["passed"] and baseline["attempts"] == 8
    steps = [m for m in read_metrics(run_dir) if "loss" in m]
    assert [m["step"] for m in steps] == [1, 2]
    for m in steps:
        assert math.isfinite(m["loss"]) and m["train_tokens"] > 0 and m["groups_kept"] >= 1
        for key in (
            "reward_mean",
            "reward_std",
            "filtered_frac",
            "entropy",
            "mismatch_kl",
            "grad_norm",
            "lr",
            "tokens_per_s",
            "step_s",
        ):
            assert key in m
    assert steps[0]["policy_lag"] == 0 and steps[1]["policy_lag"] == 1  # one-step off-policy
    assert {m["step"] for m in read_metrics(run_dir) if "eval_reward" in m} == {1, 2}
    for step in (1, 2):
        ckpt = run_dir / "checkpoints" / f"step_{step}"
        assert (ckpt / "trainable" / "adapter_model.safetensors").is_file()
        assert (ckpt / "optimizer.pt").is_file() and (ckpt / "rng.pt").is_file()
        assert json.loads((ckpt / "state.json").read_text())["step"] == step
        assert (run_dir / "rollouts" / f"step_{step}.jsonl").is_file()
    from transformers import AutoModelForCausalLM

    exported = AutoModelForCausalLM.from_pretrained(run_dir / "weights" / "step_2")
    assert exported.config.num_hidden_layers == 2
    assert (run_dir / "weights" / "step_2" / "tokenizer.json").is_file()

    cursor = json.loads((run_dir / "checkpoints" / "step_2" / "state.json").read_text())["cursor"]
    result = runner.invoke(app, ["rl", "run", str(config), "-o", str(out), "--resume", "--max-steps", "3"])
    assert result.exit_code == 0, result.output
    assert "resumed from checkpoint step 2" in result.output
    assert [m["step"] for m in read_metrics(run_dir) if "loss" in m] == [1, 2, 3]
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["step_2", "step_3"]  # keep_last = 2
    first_ids = [
        json.loads(line)["example_id"] for line in (run_dir / "rollouts" / "step_3.jsonl").read_text().splitlines()
    ]
    assert min(first_ids) == cursor  # the resumed run continues the data order where the checkpoint left it


@pytest.mark.slow
def test_refuses_without_learning_signal(tmp_path, tiny_model):
    config = rl_project(tmp_path, tiny_model)
    text = (
        config.read_text()
        .replace("min_diverse_groups = 0.0", "min_diverse_groups = 0.0\n")
        .replace("max_reward = 1.0", "max_reward = 0.0")
    )
    config.write_text(text)
    result = CliRunner().invoke(app, ["rl", "run", str(config), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "error: baseline check failed: mean reward" in result.output and "above baseline.max_reward" in result.output
    assert json.loads((tmp_path / "out" / "rl" / "t" / "baseline.json").read_text())["passed"] is False
    # the override trains anyway, in the same run folder
    result = CliRunner().invoke(
        app, ["rl", "run", str(config), "-o", str(tmp_path / "out"), "--skip-baseline", "--max-steps", "1"]
    )
    assert result.exit_code == 0, result.output
    assert [m["step"] for m in read_metrics(tmp_path / "out" / "rl" / "t") if "loss" in m] == [1]


def _config(model: Path, **trainer) -> RLConfig:
    return RLConfig.model_validate(
        {
            "model": str(model),
            "env": [{"id": "x"}],
            "sampling": {"max_tokens": 60, "temperature": 3.0},
            "trainer": {"lr": 1e-2, **trainer},
        }
    )


@pytest.mark.slow
@pytest.mark.parametrize("engine, lora", [("hf", True), ("hf", False), ("fused", True)])
def test_sampler_logprobs_match_trainer_and_sync_follows_training(tiny_model, engine, lora):
    from rl_backend.policy import Policy, Sample
    from rl_backend.sources import make_source

    config = _config(tiny_model, lora=lora)
    config.inference.engine, config.inference.dtype = engine, "float32"
    policy = Policy(config)
    source = make_source("torch", config, policy, Path("."))
    from evalkit.clients.local import LocalClient

    # one engine for every architecture: the fused path or the HF-forward fallback, behind the embedded model's
    # own client
    assert type(source).__name__ == "EngineSource" and source.engine.backend == engine
    assert isinstance(source.client, LocalClient)

    async def sample():
        messages = [[{"role": "user", "content": "q" * (i + 1)}] for i in range(8)]
        return await asyncio.gather(
            *(source.client.chat(m, SamplingArgs(max_tokens=60, temperature=3.0)) for m in messages)
        )

    completions = asyncio.run(sample())
    # at this temperature some rows hit the end token early: the batch shrinks mid-decode, and the
    # surviving rows' logprobs must still match the trainer's exactly
    assert "stop" in {c.finish_reason for c in completions}
    assert len({len(c.completion_token_ids) for c in completions}) > 1
    samples = [
        Sample(c.prompt_token_ids, c.completion_token_ids, c.logprobs, adv)
        for c, adv in zip(completions, [1.0, -1.0, 0.5, -0.5] * 2)
    ]
    stats = policy.train_step(samples, step=1)
    # same weights, same temperature: the trainer reproduces the sampler's log-probabilities
    assert stats["mismatch_kl"] < 1e-5 and stats["masked_frac"] == 0.0
    assert math.isfinite(stats["loss"]) and stats["grad_norm"] > 0
    source.sync(policy, 1)
    ids = torch.tensor([samples[0].prompt_ids + samples[0].completion_ids])
    with torch.no_grad():
        policy.model.eval()
        want = policy.model(input_ids=ids).logits
        got = source.export_model()(input_ids=ids).logits
    assert torch.allclose(want, got, atol=1e-4)
    stats2 = policy.train_step(samples, step=2)
    assert stats2["mismatch_kl"] > 0  # the weights moved since sampling
    source.sync(policy, 2)
    completions = asyncio.run(sample())  # sampled with the synced step-2 weights: on-policy again
    samples = [Sample(c.prompt_token_ids, c.completion_token_ids, c.logprobs, 1.0) for c in completions]
    assert policy.train_step(samples, step=3)["mismatch_kl"] < 1e-5
    source.close()
