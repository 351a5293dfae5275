"""The RL knobs the training docs name, each shown having its effect (tiny random-weight model, CPU).

LR schedule, gradient-norm clipping, the KL penalty to the starting model, gradient checkpointing,
truncated completions, oversampling, sampling filters and penalties in RL rollouts, and an async
level above one step (generation running up to N steps ahead of training).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from support.report_runs import RL_ENV as ENV_CODE  # rewards the digits in a reply: even random weights vary

from evalkit.core.types import Completion, RolloutState, SamplingArgs
from rl_backend.config import RLConfig, TrainerConfig
from rl_backend.policy import Policy, Sample, lr_at


def _config(tiny_model: Path, **trainer: Any) -> RLConfig:
    return RLConfig.model_validate(
        {
            "model": str(tiny_model),
            "env": [{"id": "x"}],
            "batch_size": 4,
            "rollouts_per_example": 2,
            "max_steps": 10,
            "sampling": {"max_tokens": 8},
            "trainer": {"lr": 1e-2, **trainer},
        }
    )


def _samples(advantage: float = 1.0) -> list[Sample]:
    torch.manual_seed(0)
    out = []
    for i in range(4):
        prompt = torch.randint(4, 60, (6 + i,)).tolist()
        completion = torch.randint(4, 60, (5,)).tolist()
        out.append(Sample(prompt, completion, [-4.0] * 5, advantage if i % 2 else -advantage))
    return out


def test_lr_schedules_warm_up_then_hold_or_decay_to_min_lr():
    def trainer(kind: str) -> TrainerConfig:
        return TrainerConfig(lr=1.0, warmup_steps=2, lr_scheduler_type=kind, min_lr=0.1)

    assert [lr_at(trainer("constant"), s, 6) for s in range(1, 7)] == [0.5, 1.0, 1.0, 1.0, 1.0, 1.0]
    assert [round(lr_at(trainer("linear"), s, 6), 4) for s in range(1, 7)] == [0.5, 1.0, 0.775, 0.55, 0.325, 0.1]
    cosine = [lr_at(trainer("cosine"), s, 6) for s in range(1, 7)]
    assert cosine[:2] == [0.5, 1.0] and cosine[-1] == pytest.approx(0.1) and cosine[3] == pytest.approx(0.55)


def test_the_optimizer_steps_with_the_scheduled_lr(tiny_model):
    policy = Policy(_config(tiny_model, lr_scheduler_type="linear", warmup_steps=1, min_lr=0.0))
    stats = policy.train_step(_samples(), step=10)  # the last step: linear decay reached min_lr
    assert stats["lr"] == 0.0 and policy.optimizer.param_groups[0]["lr"] == 0.0


def _grad_norm_at_step(policy: Policy) -> list[float]:
    """The global gradient norm the optimizer actually steps with (after clipping)."""
    seen: list[float] = []
    step = policy.optimizer.step

    def spy(*args: Any, **kwargs: Any) -> Any:
        grads = [p.grad for p in policy.model.parameters() if p.grad is not None]
        seen.append(float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))))
        return step(*args, **kwargs)

    policy.optimizer.step = spy  # type: ignore[method-assign]
    return seen


def test_max_grad_norm_clips_what_the_optimizer_sees(tiny_model):
    clipped, free = Policy(_config(tiny_model, max_grad_norm=1e-3)), Policy(_config(tiny_model, max_grad_norm=0))
    seen_clipped, seen_free = _grad_norm_at_step(clipped), _grad_norm_at_step(free)
    a, b = clipped.train_step(_samples(), 1), free.train_step(_samples(), 1)
    assert (
        a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-4) and a["grad_norm"] > 1e-2
    )  # reported: before clipping
    assert seen_clipped[0] == pytest.approx(1e-3, rel=1e-3) and seen_free[0] == pytest.approx(b["grad_norm"], rel=1e-4)


def _perturb_adapter(policy: Policy) -> None:
    with torch.no_grad():
        for name, param in policy.model.named_parameters():
            if "lora_B" in name:
                param.add_(torch.randn_like(param) * 0.5)


def test_kl_coef_pulls_the_policy_back_to_the_starting_model(tiny_model):
    """With zero advantages only the KL term has a gradient: it shrinks KL(policy || start) step by step."""
    torch.manual_seed(1)
    policy = Policy(_config(tiny_model, kl_coef=1.0, lr=5e-2))
    _perturb_adapter(policy)
    kls = [policy.train_step(_samples(advantage=0.0), step)["kl_ref"] for step in range(1, 6)]
    assert kls[0] > 1e-3 and kls[-1] < 0.5 * kls[0] and all(b < a for a, b in zip(kls, kls[1:]))
    plain = Policy(_config(tiny_model, lr=5e-2))
    _perturb_adapter(plain)
    before = [p.detach().clone() for p in plain.model.parameters() if p.requires_grad]
    stats = plain.train_step(_samples(advantage=0.0), 1)
    assert "kl_ref" not in stats and all(
        torch.equal(a, p) for a, p in zip(before, (p for p in plain.model.parameters() if p.requires_grad))
    )


def test_kl_reference_for_full_finetuning_is_a_frozen_copy(tiny_model):
    policy = Policy(_config(tiny_model, kl_coef=0.5, lora=False, lr=1e-3))
    assert policy.reference is not None and not any(p.requires_grad for p in policy.reference.parameters())
    first = policy.train_step(_samples(), 1)
    second = policy.train_step(_samples(), 2)
    assert first["kl_ref"] == pytest.approx(0.0, abs=1e-6) and second["kl_ref"] > 0  # moved away from the copy


def test_gradient_checkpointing_recomputes_layers_with_the_same_gradients(tiny_model):
    def run(checkpointing: bool) -> tuple[list[torch.Tensor], int]:
        torch.manual_seed(0)
        policy = Policy(_config(tiny_model, gradient_checkpointing=checkpointing, micro_batch_size=8))
        calls = []
        layer = policy.model.get_base_model().model.layers[0].self_attn  # inside the checkpointed layer
        layer.register_forward_hook(lambda *_: calls.append(1))
        policy.optimizer.step = lambda *a, **k: None  # type: ignore[method-assign]
        policy.optimizer.zero_grad = lambda *a, **k: None  # type: ignore[method-assign]  (keep the grads to compare)
        policy.train_step(_samples(), 1)
        return [p.grad.clone() for p in policy.model.parameters() if p.requires_grad], len(calls)

    grads_plain, calls_plain = run(False)
    grads_ckpt, calls_ckpt = run(True)
    assert calls_plain == 1 and calls_ckpt == 2  # one micro-batch: forward once, or forward + recompute in backward
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(grads_plain, grads_ckpt))


def _state(example: int, idx: int, reward: float, truncated: bool) -> RolloutState:
    response = Completion(text="x", prompt_token_ids=[1, 2], completion_token_ids=[3], logprobs=[-1.0])
    return RolloutState(example_id=example, rollout_idx=idx, prompt=[], reward=reward, is_truncated=truncated,
                        responses=[response])


def test_truncated_completions_can_score_zero_or_leave_the_loss():
    from rl_backend.collect import BatchCollector, _zero_truncated, to_samples

    group = [_state(0, 0, 1.0, True), _state(0, 1, 0.5, False)]
    _zero_truncated([group])
    assert group[0].reward == 0.0 and group[0].metrics["reward_before_truncation"] == 1.0 and group[1].reward == 0.5

    def collect(masked: bool) -> Any:
        config = RLConfig.model_validate({"env": [{"id": "x"}], "batch_size": 2, "rollouts_per_example": 2,
                                          "trainer": {"mask_truncated_completions": masked}})
        source = SimpleNamespace(sampling=SamplingArgs(logprobs=True), reseed=lambda seed: None)
        collector = BatchCollector(config, mixture=None, source=source, loop=SimpleNamespace(run=lambda coro: coro))  # type: ignore[arg-type]
        collector._roll_out = lambda ids, env_of: [[_state(0, 0, 0.0, True), _state(0, 1, 1.0, False)]]  # type: ignore[method-assign]
        return collector.collect(1, 0, 0)

    assert [s.advantage for s in to_samples(collect(False))] == [-0.5, 0.5]
    assert [s.advantage for s in to_samples(collect(True))] == [0.5]  # the truncated one: in the mean, out of the loss


# -- rollouts and the pipeline, end to end on the tiny model ---------------------------------------


def _run(tmp_path: Path, tiny_model: Path, top: str, tables: str) -> Path:
    from typer.testing import CliRunner

    from primekit_cli.app import app

    env_dir = tmp_path / "environments" / "digits"
    env_dir.mkdir(parents=True)
    (env_dir / "digits.py").write_text(ENV_CODE)
    config = tmp_path / "rl.toml"
    config.write_text(f'''model = "{tiny_model}"
run_name = "t"
batch_size = 4
rollouts_per_example = 2
{top}
[[env]]
id = "{env_dir}"
[baseline]
enabled = false
[ckpt]
interval = 0
save_weights = false
{tables}''')
    result = CliRunner().invoke(app, ["rl", "run", str(config), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    return tmp_path / "out" / "rl" / "t"


def _steps(run_dir: Path) -> list[dict]:
    return [m for m in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines()) if "loss" in m]


@pytest.mark.slow
def test_async_level_three_runs_up_to_three_steps_behind(tmp_path, tiny_model):
    run_dir = _run(
        tmp_path,
        tiny_model,
        "max_steps = 7",
        "[sampling]\nmax_tokens = 4\n[trainer]\nasync_level = 3\n"
        "micro_batch_size = 4\n[eval]\ninterval = 5\nnum_examples = 2\n",
    )
    steps = _steps(run_dir)
    # batches 1-3 are sampled with the starting weights; when the trainer takes batch 3 (2 steps done) the
    # sampler is idle, takes step 2's weights and samples batches 4-6; at batch 6 it takes step 5's for 7
    assert [m["policy_lag"] for m in steps] == [0, 1, 2, 1, 2, 3, 1]
    assert all(math.isfinite(m["loss"]) for m in steps)
    evals = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if "eval_reward" in line]
    assert [m["step"] for m in evals] == [5, 7]  # step 5 is no sync point: the eval waited for one


@pytest.mark.slow
def test_sampling_filters_and_oversampling_reach_the_rollouts(tmp_path, tiny_model):
    """top_k = 1 makes every rollout of a group the same (no variance: all groups filtered), and
    oversampling_factor = 2 rolls out twice the examples in a step's first round."""
    run_dir = _run(
        tmp_path,
        tiny_model,
        "max_steps = 1",
        "[sampling]\nmax_tokens = 4\ntop_k = 1\nrepetition_penalty = 1.3\n"
        "[filter]\nmax_rounds = 1\noversampling_factor = 2.0\n",
    )
    (step,) = _steps(run_dir)
    assert step["groups_generated"] == 4 and step["groups_kept"] == 0
    rows = [json.loads(line) for line in (run_dir / "rollouts" / "step_1.jsonl").read_text().splitlines()]
    by_example: dict[int, set[str]] = {}
    for row in rows:
        by_example.setdefault(row["example_id"], set()).add(row["completion"][-1]["content"])
    assert len(by_example) == 4 and all(len(texts) == 1 for texts in by_example.values())


def test_collector_sends_the_sampling_knobs():
    from rl_backend.collect import BatchCollector

    config = RLConfig.model_validate({"env": [{"id": "x"}], "batch_size": 4, "rollouts_per_example": 2, "sampling": {
        "max_tokens": 8, "top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1, "enable_thinking": False}})
    source = SimpleNamespace(sampling=SamplingArgs(logprobs=True))
    collector = BatchCollector(config, mixture=None, source=source, loop=None)  # type: ignore[arg-type]
    s = collector.sampling
    assert (s.top_k, s.extra["min_p"], s.extra["repetition_penalty"]) == (20, 0.05, 1.1)
    assert s.extra["chat_template_kwargs"] == {"enable_thinking": False} and s.logprobs
