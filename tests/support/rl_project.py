"""An RL project on the tiny random-weight model (the digits environment: even random weights vary), its
metrics, and a scripted rollout source: what several RL test modules share."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from evalkit.core.types import SamplingArgs
from support.report_runs import RL_ENV as ENV_CODE  # rewards the digits in a reply: even random weights vary
from support.scripted_client import ScriptedClient


def rl_project(tmp_path: Path, tiny_model: Path, extra: str = "") -> Path:
    """``rl.toml`` beside the digits environment: two steps of the tiny model, ``extra`` appended to the file."""
    env_dir = tmp_path / "environments" / "digits"
    env_dir.mkdir(parents=True)
    (env_dir / "digits.py").write_text(ENV_CODE)
    config = tmp_path / "rl.toml"
    config.write_text(
        f'''model = "{tiny_model}"
run_name = "t"
max_steps = 2
batch_size = 4
rollouts_per_example = 2
[sampling]
max_tokens = 8
[[env]]
id = "{env_dir}"
[trainer]
lr = 1e-3
micro_batch_size = 2
[ckpt]
interval = 1
keep_last = 2
[eval]
interval = 1
num_examples = 2
[baseline]
num_examples = 4
min_reward = 0.0
max_reward = 1.0
min_diverse_groups = 0.0
{extra}'''
    )
    return config


def read_metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


class ScriptedSource:
    """A rollout source whose client is the script; weight sync is a no-op (the script does not learn)."""

    name = "scripted"

    def __init__(self, policy, script: Callable):
        self.policy = policy
        self.client = ScriptedClient(script, model="scripted")
        self.sampling = SamplingArgs(logprobs=True)

    def sync(self, policy, step):
        return None

    def reseed(self, seed):
        return None

    def export_model(self):
        return self.policy.merged_copy()

    def close(self):
        return None
