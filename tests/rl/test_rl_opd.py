"""`opd` end to end on the tiny model: a teacher served by `prime serve`'s app (HTTP on 127.0.0.1) or loaded from a
folder scores the policy's sampled tokens; the trainer's ref_kl component by hand; each teacher that cannot serve
is one `error:` line before any rollout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.app_thread import serve_app
from support.distill_models import (
    digits_env,
    distill_config,
    model_of_another_tokenizer,
    rl_run,
    sharpened_model,
)
from support.tiny_model import write_tiny_model


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """The student (random weights), a teacher (the student with its logits 4x sharper: the final norm scaled),
    a copy of the student, and a model of another tokenizer (the same characters, other ids)."""
    root = tmp_path_factory.mktemp("opd")
    return {"student": write_tiny_model(root / "student"), "teacher": sharpened_model(root / "teacher", 4.0),
            "other": model_of_another_tokenizer(root / "other"), "env": digits_env(root), "root": root}


def _config(tmp_path: Path, models: dict[str, Path], teacher: str, steps: int = 2, top: str = "") -> Path:
    algo = f'[algo]\ntype = "opd"\n[algo.teacher]\n{teacher}'
    return distill_config(tmp_path, models["student"], models["env"], algo, run_name="opd", steps=steps, batch_size=32,
                          max_tokens=2, top=top)


@pytest.fixture(scope="module")
def served(models):
    """`prime serve`'s app over each model, on 127.0.0.1: name -> base_url."""
    from contextlib import ExitStack

    from evalkit.model.engine import Engine
    from evalkit.serving.app import build_app

    with ExitStack() as stack:
        urls = {}
        for name in ("teacher", "student", "other"):
            engine = Engine.from_name(str(models[name]), dtype="fp32", device="cpu", max_batch=8)
            stack.callback(engine.close)
            port = stack.enter_context(serve_app(build_app(engine, model_name=name)))
            urls[name] = f"http://127.0.0.1:{port}/v1"
        yield urls


@pytest.fixture(scope="module")
def plain_server():
    """An OpenAI-compatible completions server that ignores prompt_logprobs (as OpenAI's own API does)."""
    from fastapi import FastAPI

    plain = FastAPI()

    @plain.post("/v1/completions")
    async def completions() -> dict:
        return {"id": "c", "object": "text_completion", "model": "m",
                "choices": [{"index": 0, "text": "x", "logprobs": None, "finish_reason": "length"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}

    with serve_app(plain) as port:
        yield f"http://127.0.0.1:{port}/v1"


def _ref_kl(tmp_path: Path) -> list[float]:
    rows = [json.loads(line) for line in (tmp_path / "o" / "rl" / "opd" / "metrics.jsonl").read_text().splitlines()]
    assert all(row["ref_kl/mean"] == row["ref_kl"] for row in rows)  # prime-rl's name beside primekit's
    return [row["ref_kl"] for row in rows]


def test_the_ref_kl_component_by_hand(models, tmp_path):
    """One rl sample (3 tokens, advantage 0.5) and one opd sample (2 tokens, the teacher 0.5 above and 1.0 below
    the policy), on-policy (ratio 1): the loss is -0.5 (rl over its 3 tokens) + -(0.5 - 1.0)/2 (ref_kl over its 2),
    not the -0.2 one shared denominator would give; ref_kl is the mean of log p_teacher - log p over opd tokens."""
    import tomllib

    from evalkit.model.scoring import score_tokens
    from rl_backend.config import RLConfig
    from rl_backend.policy import Policy, Sample

    config = RLConfig.model_validate(tomllib.loads(_config(tmp_path, models, 'name = "x"').read_text()))
    policy = Policy(config)
    prompt = [5, 6, 7, 8]

    def own(completion: list[int]) -> list[float]:
        return [s.logprob for s in score_tokens(policy.model, prompt + completion)[len(prompt):]]

    rl = Sample(prompt, [10, 11, 12], own([10, 11, 12]), advantage=0.5)
    opd_logprobs = own([20, 21])
    opd = Sample(prompt, [20, 21], opd_logprobs, advantage=0.0,
                 ref_logprobs=[opd_logprobs[0] + 0.5, opd_logprobs[1] - 1.0])
    stats = policy.train_step([rl, opd], step=1)
    assert stats["loss"] == pytest.approx(-0.5 + 0.25, abs=1e-4)
    assert stats["ref_kl"] == pytest.approx(-0.25, abs=1e-4)
    assert stats["ref_kl/is_masked"] == 0.0 and stats["train_tokens"] == 5


@pytest.mark.slow
def test_opd_toward_a_served_teacher_closes_the_reference_kl(models, served, tmp_path):
    config = _config(tmp_path, models, f'name = "teacher"\nbase_url = "{served["teacher"]}"', steps=24)
    result = rl_run(config, tmp_path)
    assert result.exit_code == 0, result.output
    assert "algorithm    opd (ref_kl on sampled tokens), teacher teacher at http://127.0.0.1" in result.output
    assert "ref_kl -0." in result.output  # the step line
    values = _ref_kl(tmp_path)
    first, last = sum(values[:4]) / 4, sum(values[-4:]) / 4
    assert first < -0.4 and last > first + 0.15, values  # KL(policy || teacher) = -ref_kl falls


def test_opd_with_a_local_teacher_folder(models, tmp_path):
    config = _config(tmp_path, models, f'name = "{models["teacher"]}"')
    result = rl_run(config, tmp_path)
    assert result.exit_code == 0, result.output
    assert "(local, scored in-process)" in result.output
    values = _ref_kl(tmp_path)
    assert len(values) == 2 and all(v < 0 for v in values)


def _refused(tmp_path: Path, config: Path, needle: str) -> None:
    result = rl_run(config, tmp_path)
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 2 and len(lines) == 1 and needle in lines[0], result.output
    assert not list((tmp_path / "o").rglob("rollouts")), "no rollout before the teacher is checked"


def test_a_plain_server_without_prompt_logprobs_is_refused(models, plain_server, tmp_path):
    config = _config(tmp_path, models, f'name = "m"\nbase_url = "{plain_server}"')
    _refused(tmp_path, config, "cannot score given tokens: its reply has no prompt_logprobs")


def test_a_teacher_that_does_not_answer_is_refused(models, tmp_path):
    from support.app_thread import free_port

    config = _config(tmp_path, models, f'name = "t"\nbase_url = "http://127.0.0.1:{free_port()}/v1"')
    _refused(tmp_path, config, "does not answer")


def test_a_teacher_with_another_tokenizer_is_refused(models, served, tmp_path):
    config = _config(tmp_path, models, f'name = "other"\nbase_url = "{served["other"]}"')
    _refused(tmp_path, config, "has another tokenizer than the policy")


def test_a_teacher_that_is_the_policy_is_refused(models, served, tmp_path):
    config = _config(tmp_path, models, f'name = "student"\nbase_url = "{served["student"]}"')
    _refused(tmp_path, config, "gives the policy's own log-probabilities: it is the policy itself")
    by_name = _config(tmp_path, models, f'name = "{models["student"]}"')
    result = rl_run(by_name, tmp_path, "--dry-run")
    assert result.exit_code == 2 and "is the policy model itself" in result.output, result.output


def test_opd_with_interleaved_samples_is_refused(models, tmp_path):
    config = _config(tmp_path, models, f'name = "{models["teacher"]}"', top='trajectory_strategy = "interleaved"')
    result = rl_run(config, tmp_path, "--dry-run")
    assert result.exit_code == 2 and "algo.type = 'opd' trains each model turn as its own sample" in result.output

