"""prime-rl's metric names (the pinned ``v0.8.1.dev67``) and primekit's older names for the same numbers.

`prime rl run` writes both into ``metrics.jsonl`` and W&B for one release, so that dashboards built on
prime-rl runs and readers of primekit's earlier runs both work. prime-rl's orchestrator names rollout
metrics ``{scope}/{subset}/[<agent>/]<metric>/<stat>``: ``scope`` is ``train/agg`` (all environments) or
``train/<env>`` (``eval/<env>`` for evals), ``subset`` ``all`` (every rollout) or ``effective`` (kept for
training and clean), ``<agent>`` the trace's agent (``agent`` for single-agent environments, as all of
primekit's are), ``<stat>`` one of ``mean, max, min, p10, p90``. Its trainer writes ``loss/mean``,
``entropy/all/mean`` (and ``entropy/<env>/mean``), ``mismatch_kl/all/mean``, ``optim/grad_norm``, ``optim/lr`` and
``time/*``.

:func:`with_old_names` fills the old names from the new ones, so the report, the TUI and ``prime eval
view`` read a run written with either (or both).
"""

from __future__ import annotations

import re
from typing import Any

from evalkit.core import stats

AGENT = "agent"
"""The agent name prime-rl gives a single-agent environment's traces."""
TRAIN = f"train/agg/all/{AGENT}"
"""Prefix of the training rollouts' trace-level metrics, every rollout of the step."""

OLD_NAMES: dict[str, str] = {
    f"{TRAIN}/reward/mean": "reward_mean",
    "loss/mean": "loss",
    "entropy/all/mean": "entropy",
    "mismatch_kl/all/mean": "mismatch_kl",
    "ref_kl/mean": "ref_kl",
    "optim/grad_norm": "grad_norm",
    "optim/lr": "lr",
    "time/step": "step_s",
    "time/wait_for_batch": "wait_s",
}
"""prime-rl name -> primekit's earlier name for the same number."""

_ENV_REWARD = re.compile(r"train/([^/]+)/all/" + AGENT + r"/reward/mean")
_EVAL_AVG = re.compile(r"eval/([^/]+)/all/" + AGENT + r"/avg@\d+")


def with_old_names(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with each old name it lacks filled from its prime-rl name (a run written with new names only)."""
    out = dict(row)
    for new, old in OLD_NAMES.items():
        if old not in out and new in out:
            out[old] = out[new]
    env_means: dict[str, float] = {}
    for key, value in row.items():
        env = _ENV_REWARD.fullmatch(key)
        if env and env.group(1) != "agg" and f"reward_mean/{env.group(1)}" not in out:
            out[f"reward_mean/{env.group(1)}"] = value
        evaluated = _EVAL_AVG.fullmatch(key)
        if evaluated and isinstance(value, (int, float)):
            env_means[evaluated.group(1)] = float(value)
    if env_means and "eval_reward" not in out:
        out["eval_reward"] = stats.mean(env_means.values())
    return out
