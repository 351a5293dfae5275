"""`prime sft run`: the loss on the assistant's tokens only, it falls on the data, the weights load, a killed run
resumes to the same losses as an uninterrupted one, and bad input is one error line. Tiny random-weight model."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import REPO, with_pythonpath
from support.tiny_model import build_tokenizer
from typer.testing import CliRunner

from evalkit.core.runs import ResumeRequest
from primekit_cli.app import app
from rl_backend.sft import run
from rl_backend.sft_config import load_sft_config
from rl_backend.sft_samples import to_sample


def _dataset(folder: Path, rows: int = 16) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "rows.jsonl"
    lines = []
    for i in range(rows):
        a, b = i % 10, (i * 7) % 10
        lines.append(
            json.dumps(
                {
                    "prompt": [{"role": "system", "content": "Add."}, {"role": "user", "content": f"{a}+{b}="}],
                    "completion": [{"role": "assistant", "content": str(a + b)}],
                    "provenance": {"example_id": i},
                }
            )
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def _config(folder: Path, model: Path, **top: object) -> Path:
    _dataset(folder)
    extra = "".join(f"{key} = {json.dumps(value)}\n" for key, value in top.items())
    path = folder / "sft.toml"
    path.write_text(f'model = "{model}"\ndata = "rows.jsonl"\nbatch_size = 4\n{extra}\n'
                    '[trainer]\nlr = 3e-3\nlora = false\ndevice = "cpu"\n\n[ckpt]\ninterval = 2\nkeep_last = 10\n')
    return path


def _losses(run_dir: Path) -> dict[int, float]:
    return {row["step"]: row["loss"] for row in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())}


def test_only_the_assistants_tokens_are_trained():
    tokenizer = build_tokenizer()
    row = {"prompt": [{"role": "user", "content": "2+3="}],
           "completion": [{"role": "assistant", "content": "call"}, {"role": "tool", "content": "TOOL"},
                          {"role": "assistant", "content": "5"}]}
    sample = to_sample(tokenizer, row, "row 1")
    trained = [t for t, keep in zip(sample.completion_ids, sample.mask()) if keep]
    masked = [t for t, keep in zip(sample.completion_ids, sample.mask()) if not keep]
    assert tokenizer.decode(trained) == "call<|im_end|>\n5<|im_end|>\n"
    assert "TOOL" in tokenizer.decode(masked) and "2+3=" in tokenizer.decode(sample.prompt_ids)
    assert tokenizer.decode(sample.prompt_ids).endswith("<|im_start|>assistant\n")


@pytest.mark.slow
def test_sft_lowers_the_loss_and_exports_loadable_weights(tmp_path: Path, tiny_model: Path):
    config = load_sft_config(_config(tmp_path, tiny_model, epochs=6, run_name="learn"))
    summary = run(config, output_dir=tmp_path / "out")
    losses = _losses(summary.run_dir)
    assert summary.steps == 24 == max(losses) and summary.rows == 16
    assert losses[24] < 0.5 * losses[1], losses
    weights = summary.run_dir / "weights" / "step_24"
    assert {p.name for p in (summary.run_dir / "checkpoints").iterdir()} == {f"step_{n}" for n in range(6, 25, 2)}
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(weights)  # what `prime eval run -m` and `prime rl run`'s model load
    sweep = CliRunner().invoke(
        app,
        [
            "eval",
            "run",
            "arithmetic",
            "-m",
            str(summary.run_dir / "weights"),
            "--steps",
            "all",
            "-n",
            "1",
            "-r",
            "1",
            "-t",
            "2",
            "-o",
            str(tmp_path / "sweep"),
        ],
    )
    assert sweep.exit_code == 0, sweep.output  # the checkpoint sweep takes an SFT run's weights like an RL run's
    swept = {int(p.name[5:]) for p in (tmp_path / "sweep" / "sweeps" / "learn" / "arithmetic").glob("step_*")}
    assert swept == {0, *range(6, 25, 2)}  # the starting model and the 10 kept exports (interval 2, keep_last 10)


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_same_losses(tmp_path: Path, tiny_model: Path):
    """kill -9 after checkpoint step 2 of 12, then --resume: steps 3.. repeat the uninterrupted run's losses."""
    whole = run(
        load_sft_config(_config(tmp_path / "a", tiny_model, epochs=3, run_name="r")), output_dir=tmp_path / "a" / "out"
    )
    config = _config(tmp_path / "b", tiny_model, epochs=3, run_name="r")
    command = [sys.executable, "-m", "primekit_cli", "sft", "run", str(config), "-o", str(tmp_path / "b" / "out")]
    env = with_pythonpath(REPO)
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run_dir = tmp_path / "b" / "out" / "sft" / "r"
    deadline = time.monotonic() + 120
    while not (run_dir / "checkpoints" / "step_2").is_dir() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert (run_dir / "checkpoints" / "step_2").is_dir() and not (run_dir / "weights" / "step_12").exists()
    resumed = run(load_sft_config(config), output_dir=tmp_path / "b" / "out", resume=ResumeRequest.parse(True))
    assert resumed.run_dir == run_dir
    expected, got = _losses(whole.run_dir), _losses(run_dir)
    assert sorted(got) == list(range(1, 13))
    assert got == pytest.approx(expected, rel=1e-4)
    refused = CliRunner().invoke(app, ["sft", "run", str(config), "-o", str(tmp_path / "b" / "out"), "--resume"])
    assert refused.exit_code == 2 and "already finished its 12 steps" in refused.output


def test_bad_input_is_one_error_line(tmp_path: Path, tiny_model: Path):
    config = _config(tmp_path, tiny_model)
    (tmp_path / "rows.jsonl").write_text('{"prompt": "hi"}\n')
    result = CliRunner().invoke(app, ["sft", "run", str(config), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2 and "line 1 needs 'prompt' and 'completion'" in result.output
    assert "Traceback" not in result.output
    result = CliRunner().invoke(app, ["sft", "run", str(config), "--trainer.loss.type", "clip"])
    assert result.exit_code == 2 and "loss" in result.output


@pytest.mark.slow
def test_rl_starts_from_an_sft_checkpoint(tmp_path: Path, tiny_model: Path):
    """`model = <sft run>/weights/step_N` in an RL config: the RL policy starts from exactly those weights, and
    trains."""
    import torch
    from transformers import AutoModelForCausalLM

    from rl_backend.config import RLConfig
    from rl_backend.policy import Policy

    sft = run(load_sft_config(_config(tmp_path, tiny_model, max_steps=2, run_name="s")), output_dir=tmp_path / "out")
    weights = sft.run_dir / "weights" / "step_2"
    policy = Policy(RLConfig.model_validate({"model": str(weights), "env": [{"id": "arithmetic"}], "seed": 0}))
    exported = AutoModelForCausalLM.from_pretrained(weights).state_dict()
    merged = policy.merged_copy().state_dict()
    assert all(torch.equal(merged[name], exported[name]) for name in exported)
    assert not torch.equal(exported["model.embed_tokens.weight"],
                           AutoModelForCausalLM.from_pretrained(tiny_model).state_dict()["model.embed_tokens.weight"])
    config = tmp_path / "rl.toml"
    config.write_text(f'model = "{weights}"\nrun_name = "rl"\nmax_steps = 1\nbatch_size = 4\nrollouts_per_example = 2\n'
                      '[[env]]\nid = "arithmetic"\n[sampling]\nmax_tokens = 4\n[baseline]\nenabled = false\n'
                      '[filter]\nenabled = false\n[trainer]\ndevice = "cpu"\n[ckpt]\ninterval = 0\n')
    result = CliRunner().invoke(app, ["rl", "run", str(config), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "rl" / "rl" / "weights" / "step_1" / "config.json").is_file()


@pytest.mark.parametrize(
    "command, text, says",
    [
        (
            "rl",
            'model = "m"\ndata = "rows.jsonl"\n',
            "is an SFT config (it names `data` and no [[env]]); train on it with `prime sft run",
        ),
        (
            "sft",
            'model = "m"\n[[env]]\nid = "arithmetic"\n',
            "is an RL config (it names [[env]] and no `data` file); run it with `prime rl run",
        ),
    ],
)
def test_the_other_trainers_config_is_named_in_one_line(tmp_path, command, text, says):
    config = tmp_path / "job.toml"
    config.write_text(text)
    result = CliRunner().invoke(
        app, [command, "run", str(config), "--dry-run"] if command == "rl" else [command, "run", str(config)]
    )
    assert result.exit_code == 2 and says in result.output and len(result.output.strip().splitlines()) == 1
