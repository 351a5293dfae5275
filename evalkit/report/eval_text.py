"""`prime eval view`: a report of a run dir that a person reads in a terminal.

Header (env, model, status, date), the summary table, the reward-diversity line, then a few
sample rollouts (best, worst, and an error if any) with prompt, completion and reward.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.text import Text

from evalkit.core.errors import UserError, error_kind, is_scored
from evalkit.core.readback import EVAL_METADATA, read_object
from evalkit.core.runs import METADATA, RESULTS, newest_eval_run
from evalkit.core.stats import number
from evalkit.eval.results import read_rows
from evalkit.eval.summary import diversity_line, error_lines, summarize, summary_table

MAX_CHARS = 600


def resolve_run_dir(run_dir: str | None, output_dir: str | None = None) -> Path:
    if run_dir is None:
        found = newest_eval_run(output_dir)
        if found is None:
            where = f"{output_dir}/evals" if output_dir is not None else "outputs/evals or environments/*/outputs/evals"
            raise UserError(f"no eval runs under {where}; run `prime eval run ENV` first or pass a RUN_DIR")
        return found
    path = Path(run_dir)
    if not (path / METADATA).is_file() and not (path / RESULTS).is_file():
        raise UserError(f"{path} is not an eval run dir (no {METADATA} or {RESULTS} in it)")
    return path


def render_report(run_dir: Path, console: Console, samples: int = 3) -> None:
    meta = read_object(run_dir / METADATA, EVAL_METADATA)
    rows = read_rows(run_dir)
    r = int(meta.get("rollouts_per_example") or max((row["rollout_idx"] for row in rows), default=0) + 1)
    summary = summarize(rows, r, float(meta.get("pass_threshold") or 1.0))
    status = meta.get("status", "unknown")
    colour = "green" if status == "complete" else "yellow"
    console.print(f"[bold]{meta.get('env_id', '?')}[/bold] · model [bold]{meta.get('model', '?')}[/bold] · "
                  f"[{colour}]{status}[/{colour}] · {meta.get('date', '')}")
    if meta.get("sampling_args"):
        console.print(f"sampling: {meta['sampling_args']}")
    if meta.get("env_args"):
        console.print(f"env args: {meta['env_args']}")
    console.print(summary_table(summary, duration_s=meta.get("duration_s")))
    console.print(diversity_line(summary))
    for line in error_lines(rows):
        console.print(Text("error ", style="red") + Text(line))
    for title, row in _pick_samples(rows, samples):
        console.print(_sample_panel(title, row))
    console.print(f"run dir: {run_dir}")


def _pick_samples(rows: list[dict[str, Any]], samples: int) -> list[tuple[str, dict[str, Any]]]:
    """Best and worst *scored* rollouts (an errored one without a score is no "lowest reward"), then an error."""
    scored = [row for row in rows if is_scored(row)]
    if not scored:
        return [("an error", rows[0])][:samples] if rows else []
    ordered = sorted(scored, key=lambda row: float(row.get("reward") or 0.0))
    picks: list[tuple[str, dict[str, Any]]] = [("highest reward", ordered[-1])]
    if len(ordered) > 1:
        picks.append(("lowest reward", ordered[0]))
    errored = [row for row in rows if row.get("error")]
    if errored and all(row is not errored[0] for _, row in picks):
        picks.append(("an error", errored[0]))
    elif len(ordered) > 2:
        picks.append(("median", ordered[len(ordered) // 2]))
    return picks[:samples]


def _sample_panel(title: str, row: dict[str, Any]) -> Panel:
    parts: list[Any] = []
    for label, messages in (("prompt", row.get("prompt") or []), ("completion", row.get("completion") or [])):
        if isinstance(messages, str):  # a completion-format environment's text
            messages = [{"role": "text", "content": messages}]
        for message in messages:
            role = message.get("role", "?")
            if message.get("agent"):  # a multi-seat verifiers env names the seat of each message
                role = f"{message['agent']}:{role}"
            text = _clip(str(message.get("content") or ""))
            if message.get("tool_calls"):
                calls = ", ".join(c.get("function", {}).get("name", "?") for c in message["tool_calls"])
                text += f" [tool calls: {calls}]"
            line = Text(f"{label}/{role}: ", style="bold cyan" if label == "prompt" else "bold magenta")
            line.append(text)
            parts.append(line)
    if row.get("answer"):
        parts.append(Text(f"answer: {_clip(str(row['answer']))}", style="green"))
    metrics = ", ".join(f"{k}={v:.3g}" for k, v in (row.get("metrics") or {}).items())
    if is_scored(row):
        parts.append(Text(f"reward: {number(float(row.get('reward') or 0))}" + (f"  ({metrics})" if metrics else "")))
    else:
        parts.append(Text("reward: none (errored before it was scored)"))
    if row.get("error"):
        parts.append(Text(f"error ({error_kind(row)}): {row['error']}", style="red"))
    header = f"{title} · example {row.get('example_id')} · rollout {row.get('rollout_idx')}"
    return Panel(Group(*parts), title=header, title_align="left")


def _clip(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_CHARS else text[:MAX_CHARS] + f"… (+{len(text) - MAX_CHARS} chars)"
