"""The eval engine: one :class:`EvalConfig` in, a run dir and an :class:`EvalResult` out.

Every job that scores rollouts into a run dir goes through here: ``prime eval run``, the RL
trainer's baseline checks and periodic evals (into ``<rl run>/baseline/`` and
``<rl run>/evals/step_N/``), and any script::

    from evalkit.eval.config import EvalConfig
    from evalkit.eval.runner import run_eval
    result = run_eval(EvalConfig(env_id="reverse-text", model="local/smollm2-135m", num_examples=10))
    result.summary["avg_reward"], result.run_dir, result.states

Pass ``client=`` to reuse a client you already hold (it is then neither preflighted nor closed
here) and ``env=`` to reuse a loaded environment. Progress goes to ``console`` only when one is given.

Three steps: :func:`evalkit.eval.plan.plan_eval` (examples, run dir, what is missing; no model, no
writes), :func:`execute` (the missing rollouts through :func:`evalkit.eval.rollouts.run_groups`, rows
appended per finished group, a progress bar) and :class:`MetadataWriter` (metadata.json with the
summary: ``incomplete`` before the first rollout; at the end ``complete``, or
``complete_with_errors`` when any row has an error). The run dir is locked
(:class:`evalkit.core.runs.RunLock`) from the first write to the last and what is missing is re-read
under the lock, so two resumes of one run never both run the same rollouts.

Errors are not scores (:mod:`evalkit.eval.summary`); the runner never raises for a failed rollout.
Deciding what a run where every rollout failed means (the CLI exits 1) is the caller's job:
``EvalResult.all_errored``. A failed write of the run dir (full disk, read-only folder) is a
``UserError`` naming the file; the rows already written stay whole.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

from rich.console import Console

from evalkit.clients.base import ModelClient
from evalkit.core.fileio import write_json_atomic, writing_to
from evalkit.core.runs import METADATA, RunLock
from evalkit.core.types import RolloutState, id_order, row_order
from evalkit.envs.base import Environment
from evalkit.eval.config import EvalConfig
from evalkit.eval.plan import EvalPlan, plan_eval
from evalkit.eval.progress import EvalProgress
from evalkit.eval.results import ResultsWriter, drop_rows
from evalkit.eval.rollouts import run_groups
from evalkit.eval.summary import first_error, run_status, summarize
from evalkit.eval.vf_fields import anchor_run_fields, anchor_summary_fields, env_tool_defs, with_anchor_fields

SUMMARY_KEYS = ("avg_reward", "std_reward", "avg_metrics", "pass_at_k", "pass_threshold", "num_scored", "num_errors",
                "avg_error", "errors_by_kind", "usage", "reward_diversity")


@dataclass(repr=False)
class EvalResult:
    """What a run produced. ``states`` are this invocation's rollouts (with token ids/logprobs);
    ``rows`` are all rows of the run dir (resumed ones included).

    Its repr is short on purpose: ``asyncio.run`` builds the repr of its main task (and so of this result,
    every state and row included) when it restores the SIGINT handler, which cost ~0.1 ms per rollout."""

    run_dir: Path
    config: EvalConfig
    states: list[RolloutState]
    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    metadata: dict[str, Any]
    duration_s: float
    resumed_rows: int = 0
    notes: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return (f"EvalResult(run_dir={str(self.run_dir)!r}, states={len(self.states)}, rows={len(self.rows)}, "
                f"status={self.metadata.get('status')!r})")

    @property
    def complete(self) -> bool:
        """Every rollout has a row (some may hold errors: see ``metadata["status"]``)."""
        return self.metadata.get("status") in ("complete", "complete_with_errors")

    @property
    def all_errored(self) -> bool:
        """Every rollout of the run (resumed rows included) has an error, of any kind."""
        return bool(self.rows) and all(row.get("error") for row in self.rows)

    @property
    def first_error(self) -> str | None:
        """The first errored row's error, kind first (what a failing run prints)."""
        return first_error(self.rows)


def run_eval(
    config: EvalConfig,
    *,
    client: ModelClient | None = None,
    env: Environment | None = None,
    console: Console | None = None,
) -> EvalResult:
    """Synchronous wrapper around :func:`arun_eval` (not for use inside a running event loop)."""
    return asyncio.run(arun_eval(config, client=client, env=env, console=console))


async def arun_eval(
    config: EvalConfig,
    *,
    client: ModelClient | None = None,
    env: Environment | None = None,
    console: Console | None = None,
) -> EvalResult:
    """Plan, then (when anything is missing) run it and write the run dir; see the module docstring."""
    plan = plan_eval(config, env)
    if not plan.missing and not any(note.startswith("nothing to resume") for note in plan.notes):
        plan.notes.append(f"nothing left to run in {plan.run_dir}: every rollout has a row")
    if console is not None:
        for note in plan.notes:
            console.print(f"[dim]{note}[/dim]", soft_wrap=True)
    if not plan.missing:
        with writing_to(plan.run_dir), RunLock(plan.run_dir):
            meta = MetadataWriter(plan, None).write(None, [])
        return _result(plan, [], [], meta)
    own_client = client is None
    if client is None:
        client = build_client(config)
    try:
        if own_client and config.preflight:
            from evalkit.clients.factory import preflight

            await preflight(client)
        with writing_to(plan.run_dir), RunLock(plan.run_dir):
            plan.refresh()  # what is missing now that no other process can write here
            states, new_rows, meta = await execute(plan, client, console)
    finally:
        if own_client:
            await client.aclose()
    return _result(plan, states, new_rows, meta)


async def execute(
    plan: EvalPlan, client: ModelClient, console: Console | None = None
) -> tuple[list[RolloutState], list[dict[str, Any]], dict[str, Any]]:
    """Run the plan's missing rollouts into its run dir (the caller holds the lock).

    Returns this invocation's states, their rows, and the final metadata. A failure or a
    cancellation leaves metadata ``incomplete`` with every finished group's rows on disk. Rows to
    retry (``plan.retry``) are taken out of results.jsonl first; their rollouts run again.
    """
    config = plan.config
    metadata = MetadataWriter(plan, client)
    states: list[RolloutState] = []
    new_rows: list[dict[str, Any]] = []
    metadata.write("incomplete", new_rows)
    drop_rows(plan.run_dir, {(r["example_id"], int(r["rollout_idx"])) for r in plan.retry})
    env_files = plan.env.run_files(plan.run_dir, {(r["example_id"], int(r["rollout_idx"])) for r in plan.existing})
    writer = ResultsWriter(plan.run_dir)
    progress = EvalProgress(plan.total, plan.total - plan.todo, description=env_label(config),
                            console=console, enabled=console is not None)

    tool_defs = env_tool_defs(plan.env)

    def on_group(group: list[RolloutState]) -> None:
        rows = [with_anchor_fields(row_state.to_row(config.state_columns), row_state, tool_defs)
                for state in group for row_state in state.row_states()]
        if env_files is not None:
            env_files.write_group(group)
        rows = writer.write_group(rows)
        new_rows.extend(rows)
        states.extend(group)
        progress.add_group(group)

    ids = sorted(plan.missing, key=id_order)
    try:
        with progress:
            await run_groups(
                plan.env, client, [plan.examples[eid] for eid in ids], example_ids=ids,
                rollouts_per_example=config.rollouts_per_example, sampling=plan.sampling,
                bound=config.slots(), system_prompt=config.system_prompt,
                rollout_indices=plan.missing, on_group=on_group, limits=config.limits(),
            )
    except BaseException:
        writer.close()
        try:
            metadata.write("incomplete", new_rows)
        except OSError:
            pass  # e.g. the disk is full: the error being raised says so; metadata already says incomplete
        raise
    writer.close()
    return states, new_rows, metadata.write(None, new_rows)


class MetadataWriter:
    """Writes a plan's metadata.json: identity, settings, the summary of all rows, time spent, status.

    Time counts from construction (after the client is built: the run's time, not a client
    library's import) plus what earlier invocations of a resumed run recorded.
    """

    def __init__(self, plan: EvalPlan, client: ModelClient | None):
        self.plan = plan
        self.client = client
        self.started = time.perf_counter()
        self.base = {
            **plan.identity,
            "num_examples": len(plan.examples),
            "effective_sampling_args": plan.env.sampling_args.merged(plan.sampling).to_dict(),
            "state_columns": plan.config.state_columns,
            "version": _version(),
            # a resumed run keeps the date it started
            "date": plan.previous.get("date") or datetime.now(UTC).isoformat(timespec="seconds"),
            **anchor_run_fields(plan),
        }

    def write(self, status: str | None, new_rows: list[dict[str, Any]]) -> dict[str, Any]:
        """Write metadata.json; ``status`` None means the run is over (``complete`` or
        ``complete_with_errors``, from its rows)."""
        plan, client = self.plan, self.client
        summary = summarize(plan.existing + new_rows, plan.config.rollouts_per_example, plan.config.pass_threshold)
        status = status or run_status(summary)
        prior = float(plan.previous.get("duration_s") or 0.0)
        meta = {
            **self.base,
            "base_url": getattr(client, "base_url", None) if client is not None else plan.previous.get("base_url"),
            "client_model": getattr(client, "model", None) if client is not None else plan.previous.get("client_model"),
            **{key: summary[key] for key in SUMMARY_KEYS},
            "num_rollouts": summary["num_rollouts"],
            "duration_s": round(prior + time.perf_counter() - self.started, 3),
            "status": status,
        }
        meta.update(anchor_summary_fields(meta, summary))
        plan.run_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(plan.run_dir / METADATA, meta)
        return meta


def _result(plan: EvalPlan, states: list[RolloutState], new_rows: list[dict[str, Any]],
            meta: dict[str, Any]) -> EvalResult:
    config = plan.config
    rows = sorted(plan.existing + new_rows, key=row_order)
    summary = summarize(rows, config.rollouts_per_example, config.pass_threshold)
    return EvalResult(plan.run_dir, config, states, rows, summary, meta, meta["duration_s"], len(plan.existing),
                      plan.notes)


def build_client(config: EvalConfig) -> ModelClient:
    """The client a config names (endpoint id, model name, base URL, or the embedded default)."""
    from evalkit.clients.factory import make_client

    return make_client(config.client_spec())


def env_label(config: EvalConfig) -> str:
    return (
        f"{Path(config.env_id).name if config.env_id.startswith(('.', '/')) else config.env_id} · {config.model_label}"
    )


def _version() -> str:
    try:
        return importlib_metadata.version("primekit")
    except importlib_metadata.PackageNotFoundError:
        return "unknown"
