"""`opsd` (self-distillation, SDFT): the reference is the policy itself at the step's starting weights, reading the
task's demonstration in a system message before the sample; its reverse KL (ref_kl) is the signal. The demonstration
lookup, the reference and the loss by hand, and a run on the tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.report_runs import RL_ENV
from typer.testing import CliRunner

from evalkit.core.errors import UserError
from primekit_cli.app import app
from rl_backend.collect import demonstration


def test_the_demonstration_is_info_first_then_the_rows_own_field():
    row = {"question": "q", "answer": "42", "info": {"demonstration": "think, then 42"}}
    assert demonstration(row, "demonstration", "e", 0) == "think, then 42"
    assert demonstration(row, "answer", "e", 0) == "42"
    assert demonstration({"answer": "7", "info": '{"answer": "seven"}'}, "answer", "e", 0) == "seven"  # JSON info
    with pytest.raises(UserError, match="example 3 of environment 'e' has none; set algo.demo_key"):
        demonstration(row, "solution", "e", 3)


def test_the_self_reference_and_the_loss_by_hand(tiny_model):
    """The reference of a sample is the policy's own log-probability of its completion after hint + prompt; on-policy
    (ratio 1) the loss is -mean(ref - log p) over its tokens, and ``ref_kl`` that mean."""
    from support.tiny_model import build_tokenizer

    from evalkit.model.chat_format import encode_chat
    from evalkit.model.scoring import score_tokens
    from rl_backend.config import RLConfig
    from rl_backend.policy import Policy, Sample

    config = RLConfig.model_validate({"model": str(tiny_model), "env": [{"id": "x"}], "trainer": {"lora": None},
                                      "algo": {"type": "opsd", "demo_key": "answer"}})
    policy = Policy(config)
    hint = encode_chat(build_tokenizer(), [{"role": "system", "content": config.algo.template.format(
        demonstration="42")}], generation_prompt=False)
    assert hint[-2:] == [build_tokenizer().eos_token_id, build_tokenizer().encode("\n")[0]]  # "...<|im_end|>\n"
    prompt, completion = [5, 6, 7], [20, 21, 22]
    own = [s.logprob for s in score_tokens(policy.model, prompt + completion)[len(prompt):]]
    hinted = [s.logprob for s in score_tokens(policy.model, hint + prompt + completion)[len(hint) + len(prompt):]]
    sample = Sample(prompt, completion, own, advantage=0.0, hint_ids=hint, env="digits")
    assert sample.component == "ref_kl"
    stats = policy.train_step([sample], step=1)
    assert sample.ref_logprobs == pytest.approx(hinted, abs=1e-5)
    gap = sum(h - o for h, o in zip(hinted, own)) / 3
    assert stats["loss"] == pytest.approx(-gap, abs=1e-4)
    assert stats["ref_kl"] == pytest.approx(gap, abs=1e-4) and stats["ref_kl/digits/mean"] == pytest.approx(gap,
                                                                                                          abs=1e-4)


def _config(tmp_path: Path, tiny_model: Path, demo_key: str) -> Path:
    env_dir = tmp_path / "environments" / "digits"
    env_dir.mkdir(parents=True, exist_ok=True)
    (env_dir / "digits.py").write_text(RL_ENV)
    config = tmp_path / "rl.toml"
    config.write_text(f'''model = "{tiny_model}"
run_name = "opsd"
max_steps = 2
batch_size = 8
rollouts_per_example = 1
[algo]
type = "opsd"
demo_key = "{demo_key}"
[sampling]
max_tokens = 4
[[env]]
id = "{env_dir}"
[trainer]
lr = 1e-3
on_policy = true
[ckpt]
interval = 0
save_weights = false
[eval]
interval = 0
''')
    return config


def test_opsd_trains_toward_the_demonstration_conditioned_policy(tmp_path, tiny_model):
    result = CliRunner().invoke(app, ["rl", "run", str(_config(tmp_path, tiny_model, "answer")), "-o",
                                      str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert "algorithm    opsd (ref_kl on sampled tokens), teacher: the policy reading the demonstration 'answer'" \
        in result.output
    assert "baseline     off: distillation" in result.output
    lines = (tmp_path / "o" / "rl" / "opsd" / "metrics.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert len(rows) == 2 and all(row["ref_kl"] == row["ref_kl/mean"] and row["ref_kl"] != 0 for row in rows)
    assert "ref_kl " in result.output


def test_an_example_without_its_demonstration_is_refused_before_its_rollouts(tmp_path, tiny_model):
    result = CliRunner().invoke(app, ["rl", "run", str(_config(tmp_path, tiny_model, "solution")), "-o",
                                      str(tmp_path / "o")])
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 2 and len(lines) == 1 and "info['solution'] or its 'solution' field" in lines[0], \
        result.output
    assert not list((tmp_path / "o").rglob("rollouts"))
