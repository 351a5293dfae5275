"""vf-eval's fields in an eval run dir, under vf-eval's names and with its meanings (verifiers 0.3.1).

primekit's own fields stay beside them. The one place that adds them, so the writers stay small:

``metadata.json`` (verifiers' ``GenerateMetadata``): ``env_id``, ``env_args``, ``model``, ``base_url``,
``num_examples``, ``rollouts_per_example``, ``shuffle``, ``sampling_args``, ``avg_reward``, ``avg_metrics``,
``pass_at_k``, ``pass_threshold``, ``state_columns`` were already ours; added here:

- ``time``: the whole eval's wall-clock seconds (a resumed run: all its invocations; = ``duration_s``);
- ``shuffle_seed``: the seed when ``shuffle`` is on, else None;
- ``pass_all_k``: pass^k, the chance that all k draws of a group pass;
- ``usage``: MEAN ``input_tokens``/``output_tokens`` per rollout, as verifiers means it (primekit's
  totals are ``total_usage``);
- ``version_info``: see :mod:`evalkit.loading.versions`;
- ``tools``: the environment's tool schemas, or None.

(``avg_error``, the fraction of rollouts with an error, comes with the error accounting.)

``results.jsonl`` rows (verifiers' ``state_to_output``) get ``is_completed`` (the rollout reached a
stop condition, an error included), ``tool_defs`` and, as verifiers does for backward compatibility,
each metric also as a top-level key (never over a key the row already has).
"""

from __future__ import annotations

from typing import Any

from evalkit.core.errors import UserError
from evalkit.core.types import RolloutState


def anchor_run_fields(plan: Any) -> dict[str, Any]:
    """Facts of the run that do not change while it runs (for ``MetadataWriter``'s base)."""
    from evalkit.loading.versions import version_info

    config = plan.config
    return {
        "shuffle_seed": config.shuffle_seed,
        "version_info": version_info(config.env_id, config.env_dir_path),
        "tools": env_tool_defs(plan.env),
        "independent_scoring": config.independent_scoring,
    }


def anchor_summary_fields(meta: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any]:
    """Summary numbers under vf-eval's names; ``meta`` is the metadata being written (primekit's keys)."""
    n = summary["num_rollouts"]
    totals = summary["usage"]
    return {
        "time": meta["duration_s"],
        "pass_all_k": summary["pass_all_k"],
        "usage": {key: (value / n if n else 0.0) for key, value in totals.items()},
        "total_usage": dict(totals),
    }


def env_tool_defs(env: Any) -> list[dict[str, Any]] | None:
    """The OpenAI tool schemas an environment offers (``ToolEnv``, a v1 taskset's MCP tools), or None; also None
    for a v1 taskset whose tools cannot be listed offline (a record, not a reason to fail the run)."""
    try:
        return list(getattr(env, "tool_schemas", None) or []) or None
    except UserError:
        return None


def with_anchor_fields(
    row: dict[str, Any], state: RolloutState, tool_defs: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """``row`` plus vf-eval's row fields (see the module docstring)."""
    row["is_completed"] = state.stop_condition is not None
    row["tool_defs"] = tool_defs
    for name, value in (state.metrics or {}).items():
        row.setdefault(name, value)
    return row
