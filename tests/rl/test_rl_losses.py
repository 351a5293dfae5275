"""The loss family (grpo, dr_grpo, dapo, cispo, gspo) against hand-computed values, the prime-rl adapter
against the trainer's own loss, and num_iterations / the entropy bonus on a tiny random-weight model."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from support import REPO, with_pythonpath

from rl_backend.config import RLConfig
from rl_backend.losses import LOSSES, clip_range, make_loss
from rl_backend.policy import Policy, Sample


def _inputs():
    """Two sequences; ratios row 0 = [1, 0.5, 2], row 1 = [1, 1.5, (pad)]; advantages 1 and -2."""
    trainer = torch.tensor([[-1.0, -2.0, -0.5], [-1.0, -1.0, 0.0]], requires_grad=True)
    sampler = trainer.detach() - torch.log(torch.tensor([[1.0, 0.5, 2.0], [1.0, 1.5, 1.0]]))
    adv = torch.tensor([1.0, -2.0])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    return trainer, sampler, adv, mask


def _loss(name: str, **kwargs: Any):
    trainer, sampler, adv, mask = _inputs()
    out = make_loss(name, max_tokens=4, **kwargs)(trainer, sampler, adv, mask, total_tokens=5, total_sequences=2)
    out.loss.backward()
    return out, trainer.grad


def test_grpo_averages_each_sequence_then_the_sequences():
    # row 0 (A=1): -[1, min(0.5, 0.8), min(2, 1.2)] = [-1, -0.5, -1.2] -> mean -0.9 (r=2 clipped)
    # row 1 (A=-2): -[min(-2, -2), min(-3, -2.4)] = [2, 3] -> mean 2.5;  (-0.9 + 2.5) / 2 = 0.8
    out, grad = _loss("grpo")
    assert float(out.loss.detach()) == pytest.approx(0.8, rel=1e-5) and out.clipped_tokens == 1.0
    # d/dlogp of -r*A/|o_i|/G: row 0 [-1/6, -0.5/6, 0 (clipped)], row 1 [2/4, 3/4]
    assert grad.flatten().tolist() == pytest.approx([-1 / 6, -0.5 / 6, 0.0, 0.5, 0.75, 0.0], rel=1e-5)


def test_dr_grpo_divides_by_sequences_times_max_tokens():
    out, _ = _loss("dr_grpo")
    assert float(out.loss.detach()) == pytest.approx((-2.7 + 5.0) / (2 * 4), rel=1e-5)  # 0.2875


def test_dapo_clips_higher_and_averages_over_the_batchs_tokens():
    # eps_high 0.28: r=2 -> 1.28; row 1's r=1.5 with A<0 is not clipped: (-1 - 0.5 - 1.28 + 2 + 3) / 5
    out, _ = _loss("dapo")
    assert float(out.loss.detach()) == pytest.approx(2.22 / 5, rel=1e-5) and out.clipped_tokens == 1.0
    assert clip_range("dapo", None, None) == (0.2, 0.28) and clip_range("grpo", 0.1, None) == (0.1, 0.1)


def test_cispo_weights_reinforce_by_the_detached_capped_ratio():
    # -sg(min(r, 5)) * A * logp: row 0 [1, 1, 1], row 1 [-2, -3]: sum -2 over 5 tokens
    out, grad = _loss("cispo")
    assert float(out.loss.detach()) == pytest.approx(-0.4, rel=1e-5) and out.clipped_tokens == 0.0
    assert grad.flatten().tolist() == pytest.approx([-0.2, -0.1, -0.4, 0.4, 0.6, 0.0], rel=1e-5)  # -w*A/5, every token
    capped, grad = _loss("cispo", clip_eps_high=0.5)  # cap 1.5: r=2 -> 1.5, still a gradient
    assert float(capped.loss.detach()) == pytest.approx(-2.25 / 5, rel=1e-5) and capped.clipped_tokens == 1.0
    assert float(grad[0, 2]) == pytest.approx(-1.5 / 5, rel=1e-5)


def test_gspo_uses_one_geometric_mean_ratio_per_sequence():
    # s_0 = exp(mean(0, ln .5, ln 2)) = 1; s_1 = exp(ln(1.5) / 2) = sqrt(1.5); clip (1-3e-4, 1+4e-4)
    # row 0: -1; row 1 (A=-2): -min(-2 sqrt(1.5), -2 * 1.0004) = 2 sqrt(1.5); loss = (-1 + 2 sqrt(1.5)) / 2
    out, grad = _loss("gspo")
    assert float(out.loss.detach()) == pytest.approx((-1 + 2 * math.sqrt(1.5)) / 2, rel=1e-5)
    # gradient through the mean log-ratio: row 1 token t gets -A * s_1 / |o_1| / G = sqrt(1.5) / 2
    assert grad[1, :2].tolist() == pytest.approx([math.sqrt(1.5) / 2] * 2, rel=1e-5) and float(grad[1, 2]) == 0.0
    assert grad[0].tolist() == pytest.approx([-1 / 6] * 3, rel=1e-5)


def test_the_registry_holds_every_loss_and_the_config_rejects_others():
    assert set(LOSSES) == {"mask", "clip", "grpo", "dr_grpo", "dapo", "cispo", "gspo", "dppo"}
    with pytest.raises(ValueError, match="trainer.loss.type 'ppo' is unknown"):
        RLConfig.model_validate({"env": [{"id": "x"}], "trainer": {"loss": {"type": "ppo"}}})


@pytest.mark.parametrize("name", ["clip", "dapo", "cispo"])
def test_prime_rl_custom_loss_sums_to_the_trainers_loss(name: str):
    """prime-rl sums the adapter's per-sample losses and divides by the step's tokens: the trainer's value."""
    from rl_backend.prime_rl_loss import primekit_loss

    trainer, sampler, adv, mask = _inputs()
    ours = make_loss(name)(trainer, sampler, adv, mask, total_tokens=5)
    total = sum(
        primekit_loss(SimpleNamespace(trainer_logprobs=trainer[i], inference_logprobs=sampler[i],
                                      advantages=adv[i].expand(3), loss_mask=mask[i].bool(), loss_weights=None),
                      type=name).loss
        for i in range(2)
    )
    assert float(total.detach() / 5) == pytest.approx(float(ours.loss.detach()), rel=1e-6)
    with pytest.raises(ValueError, match="not token-normalised"):
        primekit_loss(SimpleNamespace(), type="grpo")


def _policy(tiny_model: Path, **trainer: Any) -> Policy:
    return Policy(RLConfig.model_validate({"model": str(tiny_model), "env": [{"id": "x"}], "batch_size": 4,
                                           "rollouts_per_example": 2, "max_steps": 10, "sampling": {"max_tokens": 8},
                                           "trainer": {"lr": 1e-2, **trainer}}))


def _samples() -> list[Sample]:
    torch.manual_seed(0)
    return [Sample(torch.randint(4, 60, (6,)).tolist(), torch.randint(4, 60, (5,)).tolist(), [-4.0] * 5,
                   1.0 if i % 2 else -1.0) for i in range(4)]


def test_num_iterations_takes_that_many_optimizer_steps(tiny_model):
    policy = _policy(tiny_model, num_iterations=3, loss={"type": "dapo"})
    calls = []
    step = policy.optimizer.step
    policy.optimizer.step = lambda *a, **k: (calls.append(1), step(*a, **k))[1]  # type: ignore[method-assign]
    stats = policy.train_step(_samples(), 1)
    assert len(calls) == 3 and math.isfinite(stats["loss"]) and stats["grad_norm"] > 0


def test_entropy_bonus_raises_entropy_where_zero_advantages_give_no_other_gradient(tiny_model):
    torch.manual_seed(0)
    policy = _policy(tiny_model, loss={"entropy_coef": 1.0}, lr=5e-2)
    flat = [Sample(s.prompt_ids, s.completion_ids, s.sampler_logprobs, 0.0) for s in _samples()]
    entropies = [policy.train_step(flat, step)["entropy"] for step in range(1, 4)]
    assert entropies[-1] > entropies[0]
    plain = _policy(tiny_model, lr=5e-2)
    assert plain.train_step(flat, 1)["grad_norm"] == 0.0  # without the bonus, nothing to learn


needs_verifiers = pytest.mark.skipif(
    __import__("importlib.util").util.find_spec("verifiers") is None,
    reason="needs the verifiers extra: pip install 'primekit[verifiers]'",
)


def _export(monkeypatch: pytest.MonkeyPatch, *overrides: str):
    from evalkit.core.errors import UserError
    from rl_backend.config import load_rl_config
    from rl_backend.export import export_config

    monkeypatch.chdir(REPO)
    config = load_rl_config("configs/rl/digit-sums.toml", list(overrides))
    try:
        return export_config(config, "prime-rl")
    except UserError as exc:
        return str(exc)


@needs_verifiers
def test_prime_rl_export_carries_token_level_losses_and_refuses_the_others(monkeypatch: pytest.MonkeyPatch):
    import tomllib

    dapo = _export(monkeypatch, "--trainer.loss.type", "dapo", "--trainer.loss.clip_eps_high", "0.3")
    loss = tomllib.loads(dapo.text)["trainer"]["loss"]
    assert loss == {"type": "custom", "import_path": "rl_backend.prime_rl_loss.primekit_loss",
                    "kwargs": {"type": "dapo", "mask_low": 0.125, "mask_high": 8.0, "clip_eps_high": 0.3}}
    assert any("install primekit where prime-rl runs" in note for note in dapo.notes)
    default = tomllib.loads(_export(monkeypatch).text)["trainer"]["loss"]
    assert default == {"type": "default", "adv_tau": 1.0, "kl_tau": 0.0}
    for name, why in (("grpo", "averages each sequence's tokens first"), ("gspo", "averages sequence-level losses"),
                      ("dr_grpo", "divides by batch_size * max_tokens")):
        refused = _export(monkeypatch, "--trainer.loss.type", name)
        assert f"trainer.loss.type = '{name}' cannot carry" in refused and why in refused
    masked = _export(monkeypatch, "--trainer.loss.clip_eps", "0.1")
    assert "trainer.loss.clip_eps = 0.1 has no prime-rl equivalent with loss.type 'mask'" in masked
    assert "trainer.num_iterations = 2 has no prime-rl equivalent" in _export(
        monkeypatch, "--trainer.num_iterations", "2"
    )


LOSS_OF = """
import json, sys
from pydantic_config import cli
from prime_rl.configs.rl import RLConfig
print(json.dumps(cli(RLConfig, args=["@", sys.argv[1]]).trainer.loss.model_dump(mode="json")))
"""


@needs_verifiers
@pytest.mark.parametrize("name", ["dapo", "cispo"])
def test_prime_rls_own_loader_reads_the_custom_loss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str):
    """With PRIME_RL_PYTHON (docs/cluster.md: how to make one), prime-rl's config classes load the custom loss."""
    import subprocess

    from support.prime_rl import prime_rl_python

    python = prime_rl_python()
    if python is None:
        pytest.skip("prime-rl's config package is not importable (set PRIME_RL_PYTHON; docs/cluster.md)")
    file = tmp_path / "c.toml"
    file.write_text(_export(monkeypatch, "--trainer.loss.type", name, "--trainer.loss.clip_eps", "0.1").text)
    result = subprocess.run(
        [python, "-c", LOSS_OF, str(file)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        env=with_pythonpath(REPO / "environments" / "digit_sums"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    loss = json.loads(result.stdout.strip().splitlines()[-1])
    assert loss == {"type": "custom", "import_path": "rl_backend.prime_rl_loss.primekit_loss",
                    "kwargs": {"type": name, "mask_low": 0.125, "mask_high": 8.0, "clip_eps": 0.1}}


def test_the_plan_names_the_losss_clipping_normalisation_and_updates():
    from rl_backend.plan import _loss_lines

    def lines(**trainer: Any) -> list[str]:
        return _loss_lines(RLConfig.model_validate({"env": [{"id": "x"}], "trainer": trainer}))

    assert lines() == []
    assert lines(loss={"type": "dapo"}, num_iterations=2) == [
        "loss         dapo: clip [0.8, 1.28], mean over the batch's tokens, 2 update(s) per batch"]
    assert lines(loss={"type": "cispo", "entropy_coef": 0.01})[0].startswith("loss         cispo: weight cap 5, ")


def test_an_unset_upper_clip_follows_the_lower_one_unless_the_loss_decouples_them():
    assert (make_loss("grpo", clip_eps=0.1).eps_low, make_loss("grpo", clip_eps=0.1).eps_high) == (0.1, 0.1)
    assert make_loss("dapo", clip_eps=0.1).eps_high == 0.28 and make_loss("gspo").eps_high == 4e-4
    assert make_loss("clip", clip_eps=0.1, clip_eps_high=0.3).eps_high == 0.3
    assert clip_range("cispo", None, None) == (0.2, 4.0)
