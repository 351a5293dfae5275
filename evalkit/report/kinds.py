"""Which kind of run a folder holds, and where the runs under an output folder are.

The three jobs write different files into their run dirs; the report reads the kind from them:

- RL (``<out>/rl/<run>``): ``metrics.jsonl``, ``config.resolved.toml`` or ``baseline.json``.
- GEPA (``<out>/gepa/<env>--<model>/<run>``): ``metadata.json`` saying ``kind``/``eval_kind`` ``"gepa"``,
  or a ``pareto_frontier.jsonl`` (both our names and verifiers' ``save_gepa_results`` layout).
- eval (``<out>/evals/<env>--<model>/<run>``, and eval dirs inside RL runs): ``results.jsonl`` or
  ``metadata.json`` otherwise.
- a checkpoint sweep (``<rl run>/sweeps/<env>``, :mod:`evalkit.eval.sweep`): ``sweep.json`` beside
  ``step_N/`` eval run dirs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from evalkit.core.errors import UserError
from evalkit.core.readback import read_object
from evalkit.core.runs import (BASELINE, BASELINE_DIR, SWEEPS_DIR, EVAL_JOB, EVALS_DIR, GEPA_JOB, METADATA, METRICS, PARETO_FRONTIER,
                          RESOLVED_CONFIG, RESULTS, RL_JOB)

Kind = Literal["eval", "gepa", "rl", "sweep"]
RL_MARKERS = (METRICS, RESOLVED_CONFIG, BASELINE)


def detect_kind(path: Path) -> Kind | None:
    """The kind of run in ``path``, or ``None`` when it holds none of the files above."""
    if (path / "sweep.json").is_file():
        return "sweep"
    if any((path / name).is_file() for name in RL_MARKERS):
        return "rl"
    meta = read_object(path / METADATA)
    if (path / PARETO_FRONTIER).is_file() or "gepa" in (meta.get("kind"), meta.get("eval_kind")):
        return "gepa"
    if (path / RESULTS).is_file() or (path / METADATA).is_file():
        return "eval"
    return None


def require_kind(path: Path) -> Kind:
    """``detect_kind`` for a folder the user named: a clear error when it is not a run dir."""
    if not path.is_dir():
        raise UserError(f"{path} is not a folder; pass a run dir such as outputs/evals/<env>--<model>/<run-id>")
    kind = detect_kind(path)
    if kind is None:
        raise UserError(
            f"{path} is not a run dir (no results.jsonl, metadata.json, metrics.jsonl or sweep.json in it); "
            "pass an eval, GEPA or RL run dir or a checkpoint sweep"
        )
    return kind


def require_one_kind(paths: list[Path]) -> Kind:
    """The kind shared by all ``paths``; one report cannot mix eval, GEPA and RL runs."""
    kinds = [require_kind(path) for path in paths]
    if len(set(kinds)) > 1:
        mixed = ", ".join(f"{path} ({kind})" for path, kind in zip(paths, kinds))
        raise UserError(f"runs of different kinds cannot share one report: {mixed}; view them one kind at a time")
    return kinds[0]


@dataclass(frozen=True)
class RunRef:
    """One run found under an output folder (what the TUI lists)."""

    kind: Kind
    path: Path
    mtime: float


def find_runs(output_dir: str | Path) -> list[RunRef]:
    """Every run under ``output_dir`` (evals, gepa, rl, and eval dirs inside RL runs), newest first."""
    root = Path(output_dir)
    candidates: list[Path] = []
    candidates += [p for p in root.glob(f"{EVAL_JOB}/*/*") if p.is_dir()]
    candidates += [p for p in root.glob(f"{GEPA_JOB}/*/*") if p.is_dir()]
    for rl_run in (p for p in root.glob(f"{RL_JOB}/*") if p.is_dir()):
        candidates.append(rl_run)
        inside = [rl_run / BASELINE_DIR, *rl_run.glob(f"{BASELINE_DIR}/*"), *rl_run.glob(f"{EVALS_DIR}/*"),
                  *rl_run.glob(f"{EVALS_DIR}/*/*"), *rl_run.glob(f"{SWEEPS_DIR}/*/step_*")]
        candidates += [p for p in inside if p.is_dir()]  # evals/step_N/<env>/: one per environment of a mixture
    runs = []
    for path in candidates:
        kind = detect_kind(path)
        if kind is not None:
            runs.append(RunRef(kind, path, _mtime(path)))
    return sorted(runs, key=lambda run: run.mtime, reverse=True)


def _mtime(path: Path) -> float:
    stamps = [f.stat().st_mtime for f in path.iterdir() if f.is_file()]
    return max(stamps, default=path.stat().st_mtime)
