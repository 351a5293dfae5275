"""`prime data from-eval`: the rollouts of finished eval runs that scored well, as a chat dataset for SFT.

One JSONL row per kept rollout: ``prompt`` and ``completion`` (chat messages, as the rollout had them:
tool calls and tool results included), ``tools`` (the OpenAI tool schemas the environment offered, when it
had tools) and ``provenance`` (run dir, environment, model, example, rollout, reward). prime-rl's SFT
trainer reads ``prompt``/``completion``/``tools`` as they are; the split keeps the loss on the completion.

Kept: rollouts scored without an error (an errored rollout is no example of good behaviour), not cut off
at the token limit (``is_truncated``: a completion that stops mid-answer teaches the model to stop
mid-answer, however it scored; ``keep_truncated`` keeps them) and whose reward is at least ``min_reward``;
with ``best_of_group`` only the best of each example's rollouts (ties: the lowest rollout index). Rows are read
through the validated read-back (a damaged line is skipped with a
warning) and written through the same UTF-8 and number checks as every primekit output.

Refused before anything is read: a ``min_reward`` that is not a finite number (NaN compares false with every
reward, so it would keep them all), a run dir given twice (its rows would be in the dataset twice), an output
inside a run dir it reads (replacing ``RUN/results.jsonl`` destroys the run), and an existing output without
``force``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.core.errors import UserError
from evalkit.core.fileio import refuse_existing, writable_target, write_bytes_atomic
from evalkit.core.readback import EVAL_METADATA, read_object
from evalkit.core.runs import METADATA, RESULTS
from evalkit.core.types import ExampleId, row_order
from evalkit.core.untrusted import row_line
from evalkit.eval.results import read_rows


@dataclass
class FromEval:
    """What :func:`write_sft_dataset` wrote and left out, per reason."""

    path: Path
    written: int
    rollouts: int
    errored: int
    below: int
    not_best: int
    truncated: int = 0


def _messages(value: Any, role: str) -> list[dict[str, Any]]:
    """A row's prompt/completion as chat messages (a plain-text rollout becomes one message of ``role``)."""
    return [{"role": role, "content": value}] if isinstance(value, str) else list(value or [])


def _check_run_dir(run_dir: Path) -> None:
    if not (run_dir / RESULTS).is_file():
        raise UserError(f"{run_dir} is not an eval run dir (no {RESULTS}); pass the folders `prime eval run` wrote")


def _run_rows(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    _check_run_dir(run_dir)
    return read_object(run_dir / METADATA, EVAL_METADATA), read_rows(run_dir)


def sft_rows(run_dirs: Sequence[Path], min_reward: float, best_of_group: bool, counts: FromEval,
             keep_truncated: bool = False) -> Iterable[dict[str, Any]]:
    """The dataset rows of ``run_dirs``, run by run, in example and rollout order; ``counts`` collects the tallies."""
    for run_dir in run_dirs:
        meta, rows = _run_rows(run_dir)
        counts.rollouts += len(rows)
        good = []
        for row in rows:
            if row.get("error") or row.get("reward") is None:
                counts.errored += 1
            elif row.get("is_truncated") and not keep_truncated:
                counts.truncated += 1
            elif float(row["reward"]) < min_reward:
                counts.below += 1
            else:
                good.append(row)
        if best_of_group:
            best: dict[ExampleId, dict[str, Any]] = {}
            for row in good:
                held = best.get(row["example_id"])
                if held is None or (row["reward"], -row["rollout_idx"]) > (held["reward"], -held["rollout_idx"]):
                    best[row["example_id"]] = row
            counts.not_best += len(good) - len(best)
            good = list(best.values())
        for row in sorted(good, key=row_order):
            yield _dataset_row(run_dir, meta, row)


def _dataset_row(run_dir: Path, meta: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"prompt": _messages(row.get("prompt"), "user"),
                           "completion": _messages(row.get("completion"), "assistant")}
    tools = row.get("tools") or meta.get("tools")
    if tools:
        out["tools"] = tools
    out["provenance"] = {"run": str(run_dir), "env_id": meta.get("env_id"), "model": meta.get("model"),
                         "example_id": row["example_id"], "rollout_idx": row["rollout_idx"], "reward": row["reward"]}
    return out


def check_request(run_dirs: Sequence[Path], output: Path, min_reward: float, force: bool) -> None:
    """The refusals of the module docstring, each one ``UserError`` line, before any run is read."""
    if not math.isfinite(min_reward):
        raise UserError(f"--min-reward {min_reward:g} is not a finite number; pass a reward such as 1 or 0.5")
    seen: dict[Path, Path] = {}
    for run_dir in run_dirs:
        _check_run_dir(run_dir)
        real = Path(run_dir).resolve()
        if real in seen:
            same = "" if str(seen[real]) == str(run_dir) else f" (as {seen[real]} and {run_dir})"
            raise UserError(f"run dir {run_dir} is given twice{same}; pass each run once (its rows would be "
                            "in the dataset twice)")
        seen[real] = Path(run_dir)
    target = writable_target(output)
    for real, run_dir in seen.items():
        if real == target or real in target.parents:
            raise UserError(f"-o {output} is inside the run dir {run_dir} that it reads; write the dataset "
                            "outside the runs")
    refuse_existing([output], force)


def write_sft_dataset(run_dirs: Sequence[Path], output: Path, min_reward: float = 1.0,
                      best_of_group: bool = False, keep_truncated: bool = False, force: bool = False) -> FromEval:
    """Write the dataset to ``output`` (JSONL, atomically); refuses when no rollout qualifies, and what
    :func:`check_request` refuses. ``force``: replace an existing ``output``."""
    check_request(run_dirs, output, min_reward, force)
    counts = FromEval(path=output, written=0, rollouts=0, errored=0, below=0, not_best=0)
    lines = [row_line(row)[0] for row in sft_rows(run_dirs, min_reward, best_of_group, counts, keep_truncated)]
    counts.written = len(lines)
    if not lines:
        cut = f", {counts.truncated} truncated (--keep-truncated keeps them)" if counts.truncated else ""
        raise UserError(
            f"no rollout of {len(run_dirs)} run(s) scored at least {min_reward:g} without an error "
            f"({counts.rollouts} rollouts, {counts.errored} errored{cut}, {counts.below} below); lower --min-reward"
        )
    output.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(output, b"".join(lines))
    return counts
