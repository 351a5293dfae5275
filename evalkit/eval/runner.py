"""The eval engine: one :class:`EvalConfig` in, a run dir and an :class:`EvalResult` out.

Library entry point for other parts (GEPA, RL baseline checks, scripts)::

    from evalkit.eval.config import EvalConfig
    from evalkit.eval.runner import run_eval
    result = run_eval(EvalConfig(env_id="reverse-text", model="local/smollm2-135m", num_examples=10))
    result.summary["avg_reward"], result.run_dir, result.states

Pass ``client=`` to reuse a client you already hold (it is then not closed here) and ``env=`` to
reuse a loaded environment. Progress and output go to ``console`` only when one is given.

Resumability: metadata.json (status ``incomplete``) is written before the first rollout, rows are
appended per finished group, and a resumed run computes which ``(example_id, rollout_idx)`` pairs
are missing and runs only those. The dataset selection is deterministic (``num_examples``,
``seed``, ``shuffle``), so example ids mean the same thing across resumes.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

from rich.console import Console

from evalkit.clients.base import ModelClient
from evalkit.envs.base import Environment
from evalkit.errors import UserError
from evalkit.eval.config import EvalConfig
from evalkit.eval.progress import EvalProgress
from evalkit.eval.results import (
    ResultsWriter,
    find_resumable,
    mismatches,
    new_run_dir,
    read_metadata,
    read_rows,
    METADATA,
)
from evalkit.fileio import write_json_atomic
from evalkit.eval.summary import summarize
from evalkit.rollouts import run_groups
from evalkit.types import RolloutState, SamplingArgs


@dataclass
class EvalResult:
    """What a run produced. ``states`` are this invocation's rollouts (with token ids/logprobs);
    ``rows`` are all rows of the run dir (resumed ones included)."""

    run_dir: Path
    config: EvalConfig
    states: list[RolloutState]
    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    metadata: dict[str, Any]
    duration_s: float
    resumed_rows: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.metadata.get("status") == "complete"


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
    if env is None:
        from evalkit.registry import load_environment

        env = load_environment(config.env_id, config.env_args)
    examples = env.get_eval_dataset(n=config.num_examples, seed=config.seed, shuffle=config.shuffle)
    if not examples:
        raise UserError(f"environment '{config.env_id}' has no examples to evaluate")
    sampling = SamplingArgs.from_dict(config.sampling)
    identity = _identity(config, sampling)
    notes: list[str] = []
    run_dir = _pick_run_dir(config, identity, notes)

    existing = read_rows(run_dir, repair=True)
    done: dict[int, set[int]] = {}
    for row in existing:
        done.setdefault(int(row["example_id"]), set()).add(int(row["rollout_idx"]))
    missing = {
        eid: [idx for idx in range(config.rollouts_per_example) if idx not in done.get(eid, set())]
        for eid in range(len(examples))
    }
    missing = {eid: idxs for eid, idxs in missing.items() if idxs}
    total = len(examples) * config.rollouts_per_example
    previous = read_metadata(run_dir) or {}
    prior_duration = float(previous.get("duration_s") or 0.0)

    own_client = client is None
    states: list[RolloutState] = []
    new_rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    meta_base = _metadata_base(config, env, sampling, identity, len(examples))
    if previous.get("date"):  # a resumed run keeps the date it started
        meta_base["date"] = previous["date"]

    def finish(status: str, client_obj: ModelClient | None) -> dict[str, Any]:
        rows = existing + new_rows
        summary = summarize(rows, config.rollouts_per_example, config.pass_threshold)
        meta = {
            **meta_base,
            "base_url": getattr(client_obj, "base_url", None) if client_obj is not None else previous.get("base_url"),
            "client_model": getattr(client_obj, "model", None) if client_obj is not None else previous.get("client_model"),
            **{k: summary[k] for k in ("avg_reward", "std_reward", "avg_metrics", "pass_at_k", "pass_threshold",
                                        "num_errors", "usage", "reward_diversity")},
            "num_rollouts": summary["num_rollouts"],
            "duration_s": round(prior_duration + time.perf_counter() - started, 3),
            "status": status,
        }
        run_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(run_dir / METADATA, meta)
        return meta

    if not missing:
        meta = finish("complete", None)
        return _result(config, run_dir, states, existing, meta, len(existing), notes)

    if client is None:
        client = build_client(config)
    started = time.perf_counter()  # the run's time, not the client library's import
    try:
        if own_client and config.preflight:
            from evalkit.clients.factory import preflight

            await preflight(client)
        finish("incomplete", client)
        writer = ResultsWriter(run_dir)
        progress = EvalProgress(total, total - sum(len(v) for v in missing.values()), description=env_label(config),
                                console=console, enabled=console is not None)

        def on_group(group: list[RolloutState]) -> None:
            rows = [state.to_row(config.state_columns) for state in group]
            writer.write_group(rows)
            new_rows.extend(rows)
            states.extend(group)
            progress.add_group(group)

        try:
            with progress:
                ids = sorted(missing)
                await run_groups(
                    env,
                    client,
                    [examples[eid] for eid in ids],
                    example_ids=ids,
                    rollouts_per_example=config.rollouts_per_example,
                    sampling=sampling,
                    max_concurrent=config.max_concurrent,
                    system_prompt=config.system_prompt,
                    rollout_indices=missing,
                    on_group=on_group,
                )
        except BaseException:
            writer.close()
            finish("incomplete", client)
            raise
        writer.close()
        meta = finish("complete", client)
    finally:
        if own_client:
            await client.aclose()
    return _result(config, run_dir, states, existing + new_rows, meta, len(existing), notes)


def build_client(config: EvalConfig) -> ModelClient:
    """The client a config names (endpoint id, model name, base URL, or the embedded default)."""
    from evalkit.clients.factory import make_client

    return make_client(config.client_spec())


def env_label(config: EvalConfig) -> str:
    return f"{Path(config.env_id).name if config.env_id.startswith(('.', '/')) else config.env_id} · {config.model_label}"


def _result(config: EvalConfig, run_dir: Path, states: list[RolloutState], rows: list[dict[str, Any]],
            meta: dict[str, Any], resumed: int, notes: list[str]) -> EvalResult:
    rows = sorted(rows, key=lambda r: (r["example_id"], r["rollout_idx"]))
    summary = summarize(rows, config.rollouts_per_example, config.pass_threshold)
    return EvalResult(run_dir, config, states, rows, summary, meta, meta["duration_s"], resumed, notes)


def _identity(config: EvalConfig, sampling: SamplingArgs) -> dict[str, Any]:
    """What must match for a run dir to be resumed by this config."""
    return {
        "env_id": config.env_id,
        "env_args": config.env_args,
        "model": config.model_label,
        "num_examples_requested": config.num_examples,
        "rollouts_per_example": config.rollouts_per_example,
        "sampling_args": sampling.to_dict(),
        "system_prompt_sha256": config.system_prompt_sha256(),
        "seed": config.seed,
        "shuffle": config.shuffle,
    }


def _pick_run_dir(config: EvalConfig, identity: dict[str, Any], notes: list[str]) -> Path:
    if config.resume is None:
        return new_run_dir(config.output_dir, config.env_id, config.model_label, create=False)
    if config.resume == "latest":
        found = find_resumable(config.output_dir, config.env_id, config.model_label, identity)
        if found is None:
            notes.append("no incomplete run with these settings to resume; started a new one")
            return new_run_dir(config.output_dir, config.env_id, config.model_label, create=False)
        notes.append(f"resuming {found}")
        return found
    run_dir = Path(config.resume)
    meta = read_metadata(run_dir)
    if meta is None:
        raise UserError(f"cannot resume {run_dir}: no readable metadata.json there (is it a run dir?)")
    differ = mismatches(meta, identity)
    if differ:
        detail = ", ".join(f"{k}={meta.get(k)!r}" for k in differ)
        raise UserError(f"cannot resume {run_dir}: it was run with different settings ({detail}); "
                        "pass the same flags, or drop --resume to start a new run")
    notes.append(f"resuming {run_dir}")
    return run_dir


def _metadata_base(config: EvalConfig, env: Environment, sampling: SamplingArgs, identity: dict[str, Any],
                   num_examples: int) -> dict[str, Any]:
    return {
        **identity,
        "num_examples": num_examples,
        "effective_sampling_args": env.sampling_args.merged(sampling).to_dict(),
        "state_columns": config.state_columns,
        "version": _version(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def _version() -> str:
    try:
        return importlib_metadata.version("primekit")
    except importlib_metadata.PackageNotFoundError:
        return "unknown"
