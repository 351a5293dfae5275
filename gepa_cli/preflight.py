"""The GEPA preflight: what the budget buys, said before any model is called, and ``--dry-run``'s plan.

Runs after the config is valid and the environments' data is drawn (the validation set's real size
decides the arithmetic), before any client is opened: a budget that buys no proposal is refused
(exit 2, naming ``-B``, ``-N`` and ``--minibatch-size``), one that buys fewer than three accepted
proposals gets a warning. ``--dry-run`` prints the whole plan (environments, models, splits, the
budget arithmetic, the run dir) and stops there: no model is loaded, nothing is written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalkit.clients.spec import ClientSpec
from evalkit.core.runs import BUDGET
from gepa_cli.budget import BudgetPlan, saved_usage
from gepa_cli.config import GepaJobConfig
from gepa_cli.data import Example


def budget_plan(config: GepaJobConfig, val: list[Example], run_dir: Path, resuming: bool) -> BudgetPlan:
    """The plan for this run; a resumed run counts what it spent and whether its seed was validated."""
    used = saved_usage(run_dir / BUDGET)[0] if resuming else 0
    seed_done = resuming and (run_dir / "state" / "gepa_state.bin").is_file()
    from gepa_cli.search import val_cost

    proposals = config.proposals_per_iteration
    return BudgetPlan(config.max_calls, len(val), config.minibatch_size, used, seed_done,
                      accept=val_cost(config, len(val)), proposals=proposals,
                      accepts=1 if config.proposal_selection == "best" else proposals,
                      merges=config.max_merge_invocations if config.use_merge else 0)


def dry_run_lines(config: GepaJobConfig, envs: list[Any], train: list[Example], val: list[Example],
                  run_dir: Path, plan: BudgetPlan) -> list[str]:
    """What ``--dry-run`` prints: one fact per line."""
    lines = ["plan (dry run: no model loaded, nothing written):"]
    for index, spec in enumerate(config.envs):
        n_train = sum(1 for ex in train if ex.env_idx == index)
        n_val = sum(1 for ex in val if ex.env_idx == index)
        args = f" args={json.dumps(spec.args)}" if spec.args else ""
        lines.append(f"  env {spec.id}{args}: train {n_train}, val {n_val}")
    lines.append(f"  task model: {_describe(config.task_spec())}")
    lines.append(f"  reflection model: {_describe(config.teacher_spec())}")
    lines.append(f"  minibatch {config.minibatch_size}, perfect score {config.perfect_score}, "
                 f"stop at score {config.stop_at_score}, seed {config.seed}")
    lines.append(f"  search: {search_line(config)}")
    lines.append(f"  {plan.line()}")
    lines.append(f"  run dir: {run_dir}")
    return lines


def search_line(config: GepaJobConfig) -> str:
    """The search settings that differ from gepa's defaults (``defaults`` when none does)."""
    from gepa_cli.search_options import GepaSearchFields

    changed = [f"{name}={_short(getattr(config, name))}" for name, field in GepaSearchFields.model_fields.items()
               if getattr(config, name) != field.get_default(call_default_factory=True)]
    return ", ".join(changed) or "gepa's defaults"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _describe(spec: ClientSpec) -> str:
    """``name (backend)`` without touching the model: the routing rule only reads names and files."""
    from evalkit.clients.routing import route
    from evalkit.core.errors import UserError

    try:
        found = route(spec)
    except UserError as exc:
        return f"{spec.label} (cannot be routed: {exc})"
    where = f" at {found.base_url}" if found.base_url else ""
    return f"{spec.label} ({found.backend}{where})"
