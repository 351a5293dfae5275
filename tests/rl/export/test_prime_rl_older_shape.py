"""`prime rl export --target prime-rl --prime-rl-shape older`: prime-rl's shape from before its commit 20f6449e1.

The older export reads back through primekit's own reader (rl_backend.config_shapes) as the same plan as the
current one; what the older shape has no key for is one `error:` line. With ``PRIME_RL_OLD_PYTHON`` naming an
interpreter where prime-rl 1e0fe9637's config package imports (docs/cluster.md), its own loader reads the file too.
"""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

import pytest
from support import REPO
from support.cli import prime

from rl_backend.config import load_rl_config

CONFIG = """\
model = "Org/Model-X"
run_name = "try7"
max_steps = 7
batch_size = 12
rollouts_per_example = 3
max_concurrent = 64
[sampling]
max_tokens = 40
temperature = 0.7
[[env]]
id = "{folder}"
args = {{ num_tasks = 50, seed = 4 }}
[[env]]
id = "{folder}"
name = "second"
[buffer]
env_ratios = [0.6, 0.4]
[trainer]
lr = 3e-5
max_seq_len = 1024
[trainer.lora]
rank = 8
alpha = 24
[ckpt]
interval = 3
keep_last = 4
[eval]
interval = 5
num_examples = 9
rollouts_per_example = 2
temperature = 0.0
at_start = true
[filter]
enabled = false
[wandb]
project = "p"
"""
FOLDER = REPO / "environments" / "digit_sums"


def _export(tmp_path: Path, text: str, *args: str) -> tuple[int, str, Path]:
    config = tmp_path / "c.toml"
    config.write_text(text)
    out = tmp_path / f"out{len(list(tmp_path.iterdir()))}.toml"
    result = prime("rl", "export", str(config), "--target", "prime-rl", "-o", str(out), *args)
    return result.exit_code, result.output, out


def test_older_export_reads_back_as_the_same_plan(tmp_path: Path) -> None:
    text = CONFIG.format(folder=FOLDER)
    code, output, older = _export(tmp_path, text, "--prime-rl-shape", "older")
    assert code == 0, output
    _, _, current = _export(tmp_path, text)
    data = tomllib.loads(older.read_text())
    orch = data["orchestrator"]
    assert (orch["rollouts_per_example"], orch["max_inflight_rollouts"]) == (3, 64)
    assert "group_size" not in orch and "algo" not in orch and "run" not in data
    assert [(e["name"], e.get("args"), e["ratio"]) for e in orch["train"]["env"]] == [
        ("digit_sums", {"num_tasks": 50, "seed": 4}, 0.6), ("second", None, 0.4)]
    assert orch["filters"] == [{"type": "zero_advantage", "enforce": False}]
    assert orch["eval"]["eval_base_model"] is True and data["wandb"] == {"project": "p"}
    assert "run.name = 'try7'" in output
    back, same = load_rl_config(older).model_dump(), load_rl_config(current).model_dump()
    assert back.pop("run_name") is None and same.pop("run_name") == "try7"
    assert back == same
    original = load_rl_config(tmp_path / "c.toml")
    assert (back["rollouts_per_example"], back["max_concurrent"], back["buffer"]["env_ratios"]) == (3, 64, [0.6, 0.4])
    assert back["filter"]["enabled"] is original.filter.enabled is False
    assert back["eval"]["at_start"] is True and back["sampling"]["max_tokens"] == 40


@pytest.mark.parametrize("schedule", ["constant", "linear"])
@pytest.mark.parametrize("shape", ["current", "older"])
def test_a_warm_up_schedule_reads_back_in_both_shapes(tmp_path: Path, shape: str, schedule: str) -> None:
    """The export states the schedule's decay (``decay_steps``: 0 after a constant warm-up, the steps after warm-up
    for a linear one); the reader took neither back before."""
    text = CONFIG.format(folder=FOLDER).replace(
        "lr = 3e-5\n", f'lr = 3e-5\nwarmup_steps = 2\nlr_scheduler_type = "{schedule}"\nmin_lr = 1e-6\n')
    code, output, out = _export(tmp_path, text, "--prime-rl-shape", shape)
    assert code == 0, output
    scheduler = tomllib.loads(out.read_text())["trainer"]["scheduler"]
    assert (scheduler["type"], scheduler["decay_steps"]) == ("linear", 0 if schedule == "constant" else 5)
    back = load_rl_config(out).trainer
    assert (back.lr_scheduler_type, back.warmup_steps) == (schedule, 2)


def test_a_decay_primekit_cannot_follow_is_one_line(tmp_path: Path) -> None:
    text = CONFIG.format(folder=FOLDER).replace(
        "lr = 3e-5\n", 'lr = 3e-5\nwarmup_steps = 2\nlr_scheduler_type = "linear"\n')
    code, output, out = _export(tmp_path, text)
    assert code == 0, output
    out.write_text(out.read_text().replace("decay_steps = 5", "decay_steps = 3"))
    result = prime("rl", "run", str(out), "--dry-run")
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "decay_steps = 3" in errors[0] and "(5)" in errors[0], result.output


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        ('[algo]\ntype = "max_rl"\n', "error: algo (type 'max_rl'): "),
        ('[[env]]\nid = "{folder}"\nname = "third"\nalgo = {{ type = "rae" }}\n', "error: [[env]] '"),
        ('[trainer.advantage]\ntype = "rloo"\n', "error: trainer.advantage.type = 'rloo': "),
        ('system_prompt = "Be brief."\n', "error: system_prompt: "),
    ],
)
def test_what_the_older_shape_cannot_express_is_one_line(tmp_path: Path, edit: str, needle: str) -> None:
    text = CONFIG.format(folder=FOLDER).replace("[trainer]\n", "") + "[trainer]\n"  # an edit may add [trainer.x]
    text = text.replace("max_seq_len = 1024\n", "").replace("lr = 3e-5\n", "")
    text = edit.format(folder=FOLDER) + text if edit.startswith("system") else text + edit.format(folder=FOLDER)
    if "third" in edit:
        text = text.replace("env_ratios = [0.6, 0.4]", "env_ratios = [0.5, 0.3, 0.2]")
    code, output, out = _export(tmp_path, text, "--prime-rl-shape", "older")
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 1 and "Traceback" not in output, output
    assert needle in errors[0] and errors[0].endswith("export with --prime-rl-shape current")
    assert not out.exists()
    assert _export(tmp_path, text)[0] == 0  # the current shape takes it


def test_the_flag_is_for_prime_rl_rl_configs_only(tmp_path: Path) -> None:
    code, output, _ = _export(tmp_path, CONFIG.format(folder=FOLDER), "--prime-rl-shape", "newest")
    assert code == 2 and "--prime-rl-shape 'newest': choose one of current, older" in output
    config = tmp_path / "c.toml"
    result = prime("rl", "export", str(config), "--target", "tinker", "--prime-rl-shape", "older")
    assert result.exit_code == 2 and "is for --target prime-rl, not tinker" in result.output


LOAD = """\
import json, sys
from pydantic_config import cli
from prime_rl.configs.rl import RLConfig
c = cli(RLConfig, args=["@", sys.argv[1]])
o = c.orchestrator
print(json.dumps({"rollouts": o.rollouts_per_example, "inflight": o.max_inflight_rollouts,
                  "envs": [[e.id, e.name, e.ratio] for e in o.train.env],
                  "max_tokens": o.train.sampling.max_completion_tokens,
                  "eval": [o.eval.interval, o.eval.eval_base_model, [e.rollouts_per_example for e in o.eval.env]],
                  "lora": c.trainer.model.lora.rank, "kl_tau": c.trainer.loss.kl_tau}))
"""


def test_prime_rl_1e0fe9637_loader_accepts_the_older_export(tmp_path: Path) -> None:
    python = os.environ.get("PRIME_RL_OLD_PYTHON")
    if not python:
        pytest.skip("set PRIME_RL_OLD_PYTHON to an interpreter with prime-rl 1e0fe9637's configs (docs/cluster.md)")
    code, output, older = _export(tmp_path, CONFIG.format(folder=FOLDER), "--prime-rl-shape", "older")
    assert code == 0, output
    done = subprocess.run([python, "-c", LOAD, str(older)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "rollouts": 3, "inflight": 64, "envs": [["digit-sums", "digit_sums", 0.6], ["digit-sums", "second", 0.4]],
        "max_tokens": 40, "eval": [5, True, [2, 2]], "lora": 8, "kl_tau": 0.0}
