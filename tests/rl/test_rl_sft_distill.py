"""`sft` (hard distillation) end to end on the tiny model: a frozen teacher served by `prime serve`'s app (HTTP on
127.0.0.1) or loaded from a folder samples the rollouts, the policy trains with the ce component on the teacher's
tokens; the ce component by hand; each teacher that cannot serve is one `error:` line before any rollout."""

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
    """The student (random weights), a teacher (another random model of the same tokenizer, logits 10x sharper:
    nearly greedy), and a model of another tokenizer (the same characters, other ids)."""
    root = tmp_path_factory.mktemp("sft")
    return {"student": write_tiny_model(root / "student"), "teacher": sharpened_model(root / "teacher", 10.0, seed=1),
            "other": model_of_another_tokenizer(root / "other"), "env": digits_env(root)}


def _config(tmp_path: Path, models: dict[str, Path], source: str, steps: int = 2, top: str = "") -> Path:
    algo = f'[algo]\ntype = "sft"\n[algo.sampling.source]\n{source}'
    return distill_config(tmp_path, models["student"], models["env"], algo, run_name="sft", steps=steps, batch_size=16,
                          max_tokens=4, top=top)


@pytest.fixture(scope="module")
def served(models):
    """`prime serve`'s app over each model on 127.0.0.1 (name -> base_url), and the paths each one was asked."""
    from contextlib import ExitStack

    from evalkit.model.engine import Engine
    from evalkit.serving.app import build_app

    asked: dict[str, list[str]] = {}
    with ExitStack() as stack:
        urls = {}
        for name in ("teacher", "other"):
            engine = Engine.from_name(str(models[name]), dtype="fp32", device="cpu", max_batch=16)
            stack.callback(engine.close)
            served_app = build_app(engine, model_name=name)
            paths = asked.setdefault(name, [])

            @served_app.middleware("http")
            async def record(request, call_next, paths=paths):
                paths.append(request.url.path)
                return await call_next(request)

            port = stack.enter_context(serve_app(served_app))
            urls[name] = f"http://127.0.0.1:{port}/v1"
        yield urls, asked


@pytest.fixture(scope="module")
def plain_server():
    """An OpenAI-compatible chat server that returns no token ids (as OpenAI's own API does)."""
    from fastapi import FastAPI

    plain = FastAPI()

    @plain.post("/v1/chat/completions")
    async def chat() -> dict:
        return {"id": "c", "object": "chat.completion", "model": "m",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "42"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}

    with serve_app(plain) as port:
        yield f"http://127.0.0.1:{port}/v1"


def _metrics(tmp_path: Path) -> list[dict]:
    lines = (tmp_path / "o" / "rl" / "sft" / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if '"loss"' in line]


def test_the_ce_component_by_hand(models, tmp_path):
    """One rl sample (3 tokens, advantage 0.5, on-policy) and one teacher sample (2 tokens): the loss is -0.5 (rl over
    its 3 tokens) + (-log p(a) - log p(b)) / 2 (ce over its 2), and ``ce`` is that mean NLL of the teacher's tokens."""
    import tomllib

    from evalkit.model.scoring import score_tokens
    from rl_backend.config import RLConfig
    from rl_backend.policy import Policy, Sample

    config = RLConfig.model_validate(tomllib.loads(_config(tmp_path, models, 'name = "x"\nbase_url = "http://h/v1"')
                                                   .read_text()))
    policy = Policy(config)
    prompt = [5, 6, 7, 8]

    def own(completion: list[int]) -> list[float]:
        return [s.logprob for s in score_tokens(policy.model, prompt + completion)[len(prompt):]]

    rl = Sample(prompt, [10, 11, 12], own([10, 11, 12]), advantage=0.5, env="digits")
    teacher_tokens = own([20, 21])
    imitated = Sample(prompt, [20, 21], [0.0, 0.0], advantage=0.0, ce_actions=True, env="digits")
    assert imitated.component == "ce" and imitated.ce_row() == [1.0, 1.0]
    stats = policy.train_step([rl, imitated], step=1)
    nll = -(teacher_tokens[0] + teacher_tokens[1]) / 2
    assert stats["loss"] == pytest.approx(-0.5 + nll, abs=1e-4)
    assert stats["ce"] == pytest.approx(nll, abs=1e-4)
    assert stats["ce/digits/mean"] == pytest.approx(nll, abs=1e-4)
    assert stats["train_tokens"] == 5 and "ref_kl" not in stats
    assert (stats["tokens/rl"], stats["tokens/ce"], stats["tokens/ref_kl"]) == (3, 2, 0)


@pytest.mark.slow
def test_sft_from_a_served_teacher_lowers_the_nll_of_its_tokens(models, served, tmp_path):
    urls, asked = served
    asked["teacher"].clear()
    config = _config(tmp_path, models, f'name = "teacher"\nbase_url = "{urls["teacher"]}"', steps=8)
    result = rl_run(config, tmp_path)
    assert result.exit_code == 0, result.output
    assert f"algorithm    sft (ce on sampled tokens), samples from teacher at {urls['teacher']}" in result.output
    assert "ce " in result.output  # the step line
    # every rollout was sampled by the teacher: one probe chat, then batch_size chats per step
    assert asked["teacher"].count("/v1/chat/completions") == 1 + 8 * 16
    rows = _metrics(tmp_path)
    values = [row["ce"] for row in rows]
    assert all(row["ce/digits/mean"] == pytest.approx(row["ce"], abs=1e-5) for row in rows)
    assert all(0.0 <= row["reward_mean"] <= 1.0 for row in rows)  # the teacher's rollouts are scored and logged
    assert sum(values[-2:]) / 2 < sum(values[:2]) / 2 - 0.3, values  # the student learns the teacher's tokens
    rollouts = [json.loads(line) for line in
                (tmp_path / "o" / "rl" / "sft" / "rollouts" / "step_1.jsonl").read_text().splitlines()]
    assert len(rollouts) == 16 and all(row["advantage"] is None for row in rollouts)


def test_sft_with_a_local_teacher_folder(models, tmp_path):
    config = _config(tmp_path, models, f'name = "{models["teacher"]}"')
    result = rl_run(config, tmp_path)
    assert result.exit_code == 0, result.output
    assert "samples from" in result.output and "(local, served in-process)" in result.output
    rows = _metrics(tmp_path)
    assert len(rows) == 2 and all(row["ce"] > 0 for row in rows)


def _refused(tmp_path: Path, config: Path, needle: str) -> None:
    result = rl_run(config, tmp_path)
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 2 and len(lines) == 1 and needle in lines[0], result.output
    assert not list((tmp_path / "o").rglob("rollouts")), "no rollout before the teacher is checked"


def test_a_teacher_with_another_tokenizer_is_refused(models, served, tmp_path):
    urls, _ = served
    config = _config(tmp_path, models, f'name = "other"\nbase_url = "{urls["other"]}"')
    _refused(tmp_path, config, "has another tokenizer or chat template than the policy")
    local = _config(tmp_path, models, f'name = "{models["other"]}"')
    _refused(tmp_path, local, "has another tokenizer or chat template than the policy")


def test_a_server_without_token_ids_is_refused(models, plain_server, tmp_path):
    config = _config(tmp_path, models, f'name = "m"\nbase_url = "{plain_server}"')
    _refused(tmp_path, config, "does not return the token ids of its replies")


def test_a_teacher_that_does_not_answer_is_refused(models, tmp_path):
    from support.app_thread import free_port

    config = _config(tmp_path, models, f'name = "t"\nbase_url = "http://127.0.0.1:{free_port()}/v1"')
    _refused(tmp_path, config, "does not answer a chat request")


def test_sft_without_a_frozen_source_is_refused(models, tmp_path):
    config = _config(tmp_path, models, 'name = "x"').read_text().replace('[algo.sampling.source]\nname = "x"\n', "")
    (tmp_path / "rl.toml").write_text(config)
    result = rl_run(tmp_path / "rl.toml", tmp_path)
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 2 and len(lines) == 1 and "algo.type 'sft' needs a teacher to sample from" in lines[0]


def test_the_baseline_checks_judge_only_environments_that_learn_from_rewards(models, tmp_path):
    """A student that scores 0 is where distillation starts: the checks of reward variance skip a distilling one."""
    config = _config(tmp_path, models, 'name = "t"\nbase_url = "http://127.0.0.1:9/v1"')
    config.write_text(config.read_text().replace("[baseline]\nenabled = false\n", ""))
    result = rl_run(config, tmp_path, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "baseline     off: distillation learns from its teacher" in result.output
    mixed = config.read_text().replace("[trainer]", f'''[[env]]
id = "{models["env"]}"
name = "rl"
algo = {{ type = "grpo" }}
[trainer]''')
    config.write_text(mixed)
    result = rl_run(config, tmp_path, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "per environment of rl (the others distill)" not in result.output  # one judged: not "per environment"
    assert " of rl (the others distill)" in result.output
