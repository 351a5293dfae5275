"""``[baseline] check = true``: ``prime env check``'s scripted policies before any rollout of the model.

RL on a reward that can be gamed teaches the model to game it, so this refuses to train when an
environment pays for an empty reply, an echo, or a list of every answer, scores nondeterministically, out
of range, or edits its inputs. Only the scripted part runs here: the baseline eval that follows measures
the model itself. The report goes to ``<run>/env_check.json`` and the terminal.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.core.errors import UserError
from evalkit.core.fileio import write_json_atomic

if TYPE_CHECKING:
    from rich.console import Console

ENV_CHECK_FILE = "env_check.json"


def run_env_checks(
    envs: Sequence[tuple[str, str, dict[str, Any], Any]], run_dir: Path, console: Console
) -> dict[str, Any]:
    """Check each ``(label, env_id, env_args, loaded env or None)``; write and print the reports; raise on a fail."""
    from evalkit.envcheck.render import report_table
    from evalkit.envcheck.run import EnvCheckOptions, check_environment

    reports = {}
    for label, env_id, env_args, env in envs:
        with console.status(f"env check {label}: scripted policies ..."):
            reports[label] = check_environment(EnvCheckOptions(env_id=env_id, env_args=dict(env_args or {})), env=env)
        console.print(report_table(reports[label]))
    data = {label: report.to_dict() for label, report in reports.items()}
    write_json_atomic(run_dir / ENV_CHECK_FILE, data)
    failed = [f"{label}: {c.name} ({c.detail})" for label, r in reports.items() for c in r.checks if c.status == "fail"]
    if failed:
        raise UserError(
            "env check failed: " + "; ".join(failed) + " (see prime env check; pass --skip-baseline to train anyway)"
        )
    return data
