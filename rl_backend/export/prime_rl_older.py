"""The prime-rl export in prime-rl's older shape (commit ``1e0fe9637``, before ``20f6449e1`` of 2026-05-23).

Clusters that still run a prime-rl from before the rename read ``rollouts_per_example``,
``max_inflight_rollouts``, ``[[orchestrator.train.env]]`` (``id``, ``name``, ``args``, ``ratio``),
``[[orchestrator.eval.env]]``, ``eval_base_model``, ``[[orchestrator.filters]]`` and a top-level ``[wandb]``.
:func:`older` rewrites the current-shape dict :func:`rl_backend.export.prime_rl.build` makes; what that shape
has no key for (an algorithm other than plain GRPO, a per-environment algorithm, a system prompt file) is one
UserError naming the key and pointing at the current shape.
"""

from __future__ import annotations

import copy
from typing import Any

from evalkit.core.errors import UserError
from rl_backend.config import RLConfig

COMMIT = "1e0fe9637d32df999a7e9413281b7ada9fd02e03"
"""The last prime-rl commit with the older config classes (its next commit, ``20f6449e1``, renamed them)."""
USE_CURRENT = "prime-rl's older shape (before 20f6449e1) cannot say it; export with --prime-rl-shape current"


def refuse(key: str, why: str) -> UserError:
    return UserError(f"{key}: {why}; {USE_CURRENT}")


def older(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``data`` (the current shape) in the older shape, and the notes for the plan."""
    data, notes = copy.deepcopy(data), []
    run = data.pop("run", None)
    if run:
        notes.append(f"run.name = '{run['name']}': the older shape has no run name (prime-rl names runs by output_dir)")
    monitors = data.pop("monitors", None)
    if monitors:
        data["wandb"] = monitors["wandb"]
    orch = data["orchestrator"]
    orch.pop("algo")  # plain GRPO: the older shape's default advantage (reward minus the group mean)
    orch["rollouts_per_example"] = orch.pop("group_size")
    orch["max_inflight_rollouts"] = orch.pop("concurrency")["max_inflight"]
    train = orch.pop("train")
    orch["train"] = {"sampling": train["sampling"], "env": [_env(s) for s in train["source"]]}
    if not train["filter_zero_advantages"]:  # the older default list keeps zero-advantage groups out
        orch["filters"] = [{"type": "zero_advantage", "enforce": False}]
    if "eval" in orch:
        ev = orch["eval"]
        ev["rollouts_per_example"] = ev.pop("group_size")
        ev["eval_base_model"] = not ev.pop("skip_first_step")
        ev["env"] = [_env(s) for s in ev.pop("source")]
    return data, notes


def check(config: RLConfig) -> None:
    """UserError for the first setting the older shape cannot express (before anything else is checked)."""
    if config.algo.type != "grpo" or config.algo.model_fields_set - {"type"}:
        raise refuse(f"algo (type '{config.algo.type}')", "it has no [orchestrator.algo] table")
    if config.trainer.advantage.type != "grpo":
        raise refuse(f"trainer.advantage.type = '{config.trainer.advantage.type}'",
                     "the older [orchestrator.advantage] is GRPO's group mean or a custom import")
    for entry in config.env:
        if entry.algo is not None:
            raise refuse(f"[[env]] '{entry.id}' algo", "per-environment algorithms are a current-shape key")
    if config.system_prompt:
        raise refuse("system_prompt", "the older [[orchestrator.train.env]] passes args to load_environment, not a "
                     "taskset's system_prompt file")


def _env(source: dict[str, Any]) -> dict[str, Any]:
    taskset = dict(source["env"]["taskset"])
    env: dict[str, Any] = {"id": taskset.pop("id"), "name": source["name"]}
    if taskset:
        env["args"] = taskset
    if "ratio" in source:
        env["ratio"] = source["ratio"]
    return env
