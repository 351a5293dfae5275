"""`prime rl run` on environments written for verifiers: rollouts go through the bridge to the trainer's own
engine, and every model turn becomes a training sample with the exact token ids and logprobs it was sampled with.

The policy is the tiny random-weight Llama (real tensors, real trainer, the in-process engine in float32, so
at step 1 the trainer's log-probabilities must equal the sampler's). Its replies are random characters; the
environments reward the fraction of digits in them, so groups have a learning signal.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip(
    "verifiers", reason="needs the verifiers extra: pip install 'primekit[verifiers]' (make test installs it)"
)


from primekit_cli.app import app

LEGACY_MULTI_TURN = '''
import verifiers as vf
from datasets import Dataset


class MoreDigits(vf.MultiTurnEnv):
    async def env_response(self, messages, state, **kwargs):
        return [{"role": "user", "content": "Again, with more digits."}]


def load_environment(num_examples: int = 12, max_turns: int = 3):
    rows = [{"question": f"Say a number like {i}", "answer": str(i)} for i in range(num_examples)]

    def digit_fraction(completion) -> float:
        text = "".join(m["content"] or "" for m in completion if m["role"] == "assistant")
        return sum(c.isdigit() for c in text) / max(1, len(text))

    return MoreDigits(dataset=Dataset.from_list(rows), rubric=vf.Rubric(funcs=[digit_fraction]), max_turns=max_turns)
'''

V1_ENDLESS = '''
import itertools

import verifiers.v1 as vf


class SumData(vf.TaskData):
    answer: str


class SumTask(vf.Task[SumData]):
    @vf.reward(weight=1.0)
    async def digit_fraction(self, trace: vf.Trace) -> float:
        text = trace.last_reply
        return sum(c.isdigit() for c in text) / max(1, len(text))


class EndlessConfig(vf.TasksetConfig):
    start: int = 0


class EndlessTaskset(vf.Taskset[SumTask, EndlessConfig]):
    INFINITE = True

    def load(self):
        for i in itertools.count(self.config.start):
            yield SumTask(SumData(idx=i, prompt=f"What is {i}+1?", answer=str(i + 1)), self.config.task)


__all__ = ["EndlessTaskset"]
'''

CONFIG = """model = "{model}"
run_name = "{name}"
max_steps = {steps}
batch_size = 4
rollouts_per_example = 2
[sampling]
max_tokens = 6
[[env]]
id = "{env}"
[trainer]
lr = 1e-3
micro_batch_size = 8
on_policy = true
[inference]
dtype = "float32"
[filter]
enabled = false
[baseline]
num_examples = 2
min_reward = 0.0
max_reward = 1.0
min_diverse_groups = 0.0
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    for name, code in (("vf_more_digits", LEGACY_MULTI_TURN), ("vf_endless", V1_ENDLESS)):
        (tmp_path / "environments" / name).mkdir(parents=True)
        (tmp_path / "environments" / name / f"{name}.py").write_text(code)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _train(project: Path, model: Path, env: str, steps: int, monkeypatch) -> tuple[list[list], Path]:
    """Run `prime rl run` in this process (the main thread, where verifiers installs its signal handlers),
    recording the samples each step trains on."""
    import rl_backend.collect as collect

    trained: list[list] = []
    real = collect.to_samples
    monkeypatch.setattr(collect, "to_samples",
                        lambda batch, tokenizer=None: trained.append(real(batch, tokenizer)) or trained[-1])
    config = project / f"{env}.toml"
    config.write_text(CONFIG.format(model=model, name=env, env=env, steps=steps))
    result = CliRunner().invoke(app, ["rl", "run", str(config), "-o", str(project / "out")])
    assert result.exit_code == 0, result.output
    return trained, project / "out" / "rl" / env


def _rows(run_dir: Path, step: int) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "rollouts" / f"step_{step}.jsonl").read_text().splitlines()]


def _metrics(run_dir: Path) -> list[dict]:
    return [
        m for m in (json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()) if "loss" in m
    ]


@pytest.mark.slow
def test_legacy_multi_turn_env_trains_on_every_turn_with_its_token_ids(project, tiny_model, monkeypatch):
    from transformers import AutoTokenizer

    trained, run_dir = _train(project, tiny_model, "vf-more-digits", 2, monkeypatch)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    decode = tokenizer.decode
    assert len(trained) == 2
    for step, samples in zip((1, 2), trained):
        rows = _rows(run_dir, step)
        assert all(r["error"] is None and r["stop_condition"] == "max_turns_reached" for r in rows)
        assert len(samples) == sum(int(r["metrics"]["num_turns"]) for r in rows) == 4 * 3  # one sample per model turn
        for sample in samples:
            assert sample.prompt_ids and sample.completion_ids
            assert len(sample.sampler_logprobs) == len(sample.completion_ids)
            assert all(math.isfinite(lp) and lp <= 0 for lp in sample.sampler_logprobs)
        later = [s for s in samples if "Again, with more digits." in decode(s.prompt_ids)]
        assert len(later) == 4 * 2  # turns 2 and 3 are prompted with the environment's reply
        said = [
            tokenizer.decode(s.completion_ids, skip_special_tokens=True).strip() for s in samples
        ]  # as the chat holds it
        for sample in later:  # ... and with what the model said before
            assert any(
                text and text in decode(sample.prompt_ids) for text, other in zip(said, samples) if other is not sample
            )
    steps = _metrics(run_dir)
    assert [m["step"] for m in steps] == [1, 2] and all(math.isfinite(m["loss"]) for m in steps)
    assert steps[0]["mismatch_kl"] < 1e-5  # step 1 trains the sampler's own weights: ids and logprobs line up
    assert steps[0]["samples"] == 12 and any(m["grad_norm"] > 0 for m in steps)


@pytest.mark.slow
@pytest.mark.verifiers
def test_v1_infinite_taskset_is_drawn_in_order_and_trained_per_turn(project, tiny_model, monkeypatch):
    trained, run_dir = _train(project, tiny_model, "vf-endless", 1, monkeypatch)
    rows = _rows(run_dir, 1)
    assert [r["prompt"][-1]["content"] for r in rows] == ["What is 0+1?"] * 2 + ["What is 1+1?"] * 2
    assert all(r["error"] is None and "digit_fraction" in r["metrics"] for r in rows)
    (samples,) = trained
    assert len(samples) == 4  # single-turn tasks: one sample per rollout
    assert all(s.completion_ids and len(s.sampler_logprobs) == len(s.completion_ids) for s in samples)
    (step,) = _metrics(run_dir)
    assert step["mismatch_kl"] < 1e-5 and math.isfinite(step["loss"])
    assert json.loads((run_dir / "baseline" / "metadata.json").read_text())["num_rollouts"] == 4
