"""`prime eval tui`: a keyboard browser of runs and rollouts in the terminal (Textual).

Three screens, each with its keys in the footer:

- runs: every eval, GEPA and RL run under the output folder, newest first (``enter`` opens, ``r`` reloads);
- a run: its rollouts (eval: by example; RL: by step and example) or, for GEPA, its candidates;
  ``f`` filters by reward (``>=0.5``, ``<1``, ``0.2..0.8``, ``=0``, ``err``), ``s`` sorts by reward,
  ``enter`` opens one, ``escape`` goes back;
- a rollout (or candidate): prompt, completion with tool calls, reward, metrics, error;
  ``n``/``p`` page to the next/previous one in the run's (filtered) list.

The data comes from the same loaders as the HTML report. RL runs load rollouts of their newest steps,
at most ``MAX_RL_ROWS`` rows (older steps stay in ``rollouts/step_N.jsonl``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Static

from evalkit.core import readback
from evalkit.core.runs import BASELINE_DIR, EVALS_DIR, METADATA, METRICS, RunRef, find_runs
from evalkit.report.eval_data import error_kind_and_message, load_eval_run, text_of
from evalkit.report.gepa_data import load_gepa_run
from evalkit.report.rl_data import load_rl_run, read_rollouts

MAX_RL_ROWS = 20_000
Row = dict[str, Any]


def parse_reward_filter(text: str) -> Callable[[Row], bool]:
    """``>=0.5``, ``>0``, ``<1``, ``<=0.2``, ``=1``, ``0.2..0.8`` (inclusive), ``err``; empty = everything."""
    text = text.strip().replace(" ", "")
    if not text:
        return lambda row: True
    if text in ("err", "error", "errors"):
        return lambda row: bool(row.get("error"))
    span = re.fullmatch(r"(-?[\d.]+)\.\.(-?[\d.]+)", text)
    if span:
        low, high = float(span.group(1)), float(span.group(2))
        return lambda row: low <= _reward(row) <= high
    match = re.fullmatch(r"(>=|<=|>|<|==|=)(-?[\d.]+(?:e-?\d+)?)", text)
    if not match:
        raise ValueError(f"not a reward filter: {text!r} (try >=0.5, <1, 0.2..0.8, =0 or err)")
    op, value = match.group(1), float(match.group(2))
    tests = {
        ">=": value.__le__,
        "<=": value.__ge__,
        ">": value.__lt__,
        "<": value.__gt__,
        "=": value.__eq__,
        "==": value.__eq__,
    }
    test = tests[op]
    return lambda row: test(_reward(row))


def _reward(row: Row) -> float:
    try:
        return float(row.get("reward") or 0.0)
    except (TypeError, ValueError):
        return 0.0


def run_summary(ref: RunRef) -> tuple[str, str, str, str]:
    """(what, size, reward, status) for the runs list, read cheaply from metadata where possible."""
    from evalkit.core.readback import EVAL_METADATA, GEPA_METADATA, read_object

    meta = read_object(ref.path / METADATA, GEPA_METADATA if ref.kind == "gepa" else EVAL_METADATA)
    if ref.kind == "gepa":
        score = meta.get("best_val_score", meta.get("best_score"))
        return (
            str(meta.get("env") or meta.get("env_id") or ref.path.parent.name),
            f"{meta.get('num_candidates', '?')} candidates",
            "" if score is None else f"best {float(score):.3f}",
            str(meta.get("status") or ""),
        )
    if ref.kind == "rl":
        run = load_rl_run(ref.path)
        last = run.steps[-1] if run.steps else {}
        reward = f"{last['reward_mean']:.3f}" if "reward_mean" in last else ""
        return ("rl: " + ref.path.name, f"{len(run.steps)} steps", reward, "")
    if ref.kind == "sft":  # no rewards: the last step's loss stands in the reward column
        run = load_rl_run(ref.path)
        last = run.steps[-1] if run.steps else {}
        return (
            "sft: " + ref.path.name,
            f"{len(run.steps)} steps",
            f"loss {last['loss']:.3f}" if "loss" in last else "",
            "",
        )
    avg = meta.get("avg_reward")
    return (
        _eval_what(ref.path),
        f"{meta.get('num_rollouts', '?')} rollouts",
        "" if avg is None else f"{float(avg):.3f}",
        str(meta.get("status") or ("incomplete" if not meta else "")),
    )


def _eval_what(path: Path) -> str:
    """``<env>--<model>`` for eval runs; ``rl <run> baseline`` / ``rl <run> eval`` for those inside RL runs."""
    if path.name == BASELINE_DIR and (path.parent / METRICS).is_file():
        return f"rl {path.parent.name} baseline"
    if path.parent.name == EVALS_DIR and (path.parent.parent / METRICS).is_file():
        return f"rl {path.parent.parent.name} eval"
    return path.parent.name


class RunListScreen(Screen):
    # priority: the table's own enter binding is hidden from the footer; this one shows what enter does
    BINDINGS = [
        Binding("enter", "open", "open run", priority=True),
        Binding("r", "reload", "reload"),
        Binding("q", "app.quit", "quit"),
    ]

    def __init__(self, output_dir: Path):
        super().__init__()
        self.output_dir = output_dir
        self.runs: list[RunRef] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.title = "primekit runs"
        self.action_reload()

    def action_reload(self) -> None:
        table = self.query_one("#runs", DataTable)
        table.clear(columns=True)
        table.add_columns("kind", "run", "what", "size", "reward", "status")
        self.runs = find_runs(self.output_dir)
        for i, ref in enumerate(self.runs):
            what, size, reward, status = run_summary(ref)
            table.add_row(ref.kind, ref.path.name, what, size, reward, status, key=str(i))
        self.sub_title = (
            f"{len(self.runs)} runs under {self.output_dir}" if self.runs else f"no runs under {self.output_dir}"
        )
        table.focus()

    def action_open(self) -> None:
        table = self.query_one("#runs", DataTable)
        if self.runs and table.cursor_row is not None and table.cursor_row < len(self.runs):
            self.app.push_screen(RunScreen(self.runs[table.cursor_row]))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()  # a mouse click on a row


class RunScreen(Screen):
    BINDINGS = [
        Binding("enter", "open", "open rollout", priority=True),
        Binding("f", "filter", "filter by reward"),
        Binding("s", "sort", "sort by reward"),
        Binding("escape", "back", "back"),
        Binding("q", "app.quit", "quit"),
    ]

    def __init__(self, ref: RunRef):
        super().__init__()
        self.ref = ref
        self.rows: list[Row] = []
        self.shown: list[Row] = []
        self.sort_state = 0  # 0: file order, 1: reward descending, 2: ascending
        self.predicate: Callable[[Row], bool] = lambda row: True

    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(
            placeholder="reward filter: >=0.5, <1, 0.2..0.8, =0, err (enter applies, empty clears)", id="filter"
        )
        yield DataTable(id="rows", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#filter", Input).display = False
        self.title = f"{self.ref.kind} · {self.ref.path.name}"
        self.rows = self._load()
        self.refresh_table()

    def _load(self) -> list[Row]:
        if self.ref.kind == "gepa":
            run = load_gepa_run(self.ref.path)
            return [
                {
                    "kind": "candidate",
                    "idx": c.idx,
                    "reward": c.score,
                    "prompt_text": c.prompt,
                    "parents": c.parents,
                    "calls": c.discovered_at_calls,
                    "is_best": c.is_best,
                    "subscores": c.subscores,
                }
                for c in run.candidates
            ]
        if self.ref.kind == "sft":  # an SFT run has steps, not rollouts: one row per step
            return [{"kind": "step", **metrics} for metrics in load_rl_run(self.ref.path).steps]
        if self.ref.kind == "rl":
            run = load_rl_run(self.ref.path)
            steps, total = [], 0
            for step in reversed(list(run.rollout_files)):
                steps.insert(0, step)
                total += sum(1 for _ in run.rollout_files[step].open(encoding="utf-8"))
                if total >= MAX_RL_ROWS:
                    break
            return read_rollouts(run, steps)
        return load_eval_run(self.ref.path).rows

    def refresh_table(self) -> None:
        table = self.query_one("#rows", DataTable)
        table.clear(columns=True)
        shown = [row for row in self.rows if self.predicate(row)]
        if self.sort_state:
            shown.sort(key=_reward, reverse=self.sort_state == 1)
        self.shown = shown
        if self.ref.kind == "gepa":
            table.add_columns("candidate", "val score", "found at call", "parents", "prompt")
            for i, row in enumerate(shown):
                first = (row["prompt_text"].strip().splitlines() or [""])[0][:80]
                table.add_row(
                    f"{row['idx']}{' ★' if row['is_best'] else ''}",
                    _fmt(row["reward"]),
                    str(row["calls"] or ""),
                    ", ".join(map(str, row["parents"])),
                    first,
                    key=str(i),
                )
        elif self.ref.kind == "sft":
            from evalkit.report.sft_data import STEP_COLUMNS

            table.add_columns("step", *(title for _, title, _ in STEP_COLUMNS))
            for i, row in enumerate(shown):
                table.add_row(
                    str(row.get("step")), *(_fmt(row.get(key), digits) for key, _, digits in STEP_COLUMNS), key=str(i)
                )
        else:
            columns = (["step"] if self.ref.kind == "rl" else []) + [
                "example",
                "rollout",
                "reward",
                "stop",
                "error",
                "completion",
            ]
            table.add_columns(*columns)
            for i, row in enumerate(shown):
                cells = ([str(row.get("step"))] if self.ref.kind == "rl" else []) + [
                    str(row.get("example_id")),
                    str(row.get("rollout_idx")),
                    _fmt(row.get("reward")),
                    str(row.get("stop_condition") or ""),
                    error_kind_and_message(row)[0] if row.get("error") else "",
                    _preview(row),
                ]
                table.add_row(*cells, key=str(i))
        order = {0: "", 1: " · sorted by reward ↓", 2: " · sorted by reward ↑"}[self.sort_state]
        self.sub_title = f"{len(shown)} of {len(self.rows)} shown{order}"
        table.focus()

    async def action_open(self) -> None:
        box = self.query_one("#filter", Input)
        if box.has_focus:  # enter in the filter box applies the filter
            await box.action_submit()
            return
        table = self.query_one("#rows", DataTable)
        if self.ref.kind == "sft":  # a step's numbers are all in its row; there is no rollout to open
            return
        if self.shown and table.cursor_row is not None and table.cursor_row < len(self.shown):
            self.app.push_screen(RolloutScreen(self.shown, table.cursor_row, self.ref.kind))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            self.predicate = parse_reward_filter(event.value)
        except ValueError as exc:
            self.notify(str(exc), severity="error")
            return
        event.input.display = bool(event.value.strip())  # the filter in force stays visible
        self.refresh_table()  # and gives the keys back to the table

    def action_sort(self) -> None:
        self.sort_state = (self.sort_state + 1) % 3
        self.refresh_table()

    def action_back(self) -> None:
        box = self.query_one("#filter", Input)
        if box.has_focus:
            self.query_one("#rows", DataTable).focus()
            return
        self.app.pop_screen()


class RolloutScreen(Screen):
    BINDINGS = [
        Binding("n", "move(1)", "next"),
        Binding("p", "move(-1)", "previous"),
        Binding("escape", "back", "back"),
        Binding("q", "app.quit", "quit"),
    ]

    def __init__(self, rows: list[Row], index: int, kind: str):
        super().__init__()
        self.rows, self.index, self.kind = rows, index, kind

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll():
            yield Static(id="rollout-body")
        yield Footer()

    def on_mount(self) -> None:
        self.show()

    def show(self) -> None:
        row = self.rows[self.index]
        self.query_one("#rollout-body", Static).update(
            candidate_view(row) if self.kind == "gepa" else rollout_view(row)
        )
        self.title = f"{'candidate' if self.kind == 'gepa' else 'rollout'} {self.index + 1} of {len(self.rows)}"
        self.query_one(VerticalScroll).scroll_home(animate=False)

    def action_move(self, delta: int) -> None:
        new = self.index + delta
        if 0 <= new < len(self.rows):
            self.index = new
            self.show()
        else:
            self.notify("no more in this direction (the list is the run's filtered rows)")

    def action_back(self) -> None:
        self.app.pop_screen()


def rollout_view(row: Row) -> RenderableType:
    """Prompt, completion (tool calls included), answer, reward, metrics and error of one rollout."""
    head = Text(f"example {row.get('example_id')} · rollout {row.get('rollout_idx')}", style="bold")
    if "step" in row:
        head = Text(f"step {row['step']} · ", style="bold") + head
    parts: list[RenderableType] = [head]
    metrics = ", ".join(
        f"{k} {float(v):.3f}" for k, v in (row.get("metrics") or {}).items() if isinstance(v, (int, float))
    )
    parts.append(Text(f"reward {_fmt(row.get('reward'))}" + (f"   ({metrics})" if metrics else ""), style="bold green"))
    extra = [
        f"stop {row['stop_condition']}" if row.get("stop_condition") else "",
        "truncated" if row.get("is_truncated") else "",
        f"advantage {row['advantage']:.3f}" if isinstance(row.get("advantage"), (int, float)) else "",
        ("kept" if row["kept"] else "filtered out") if "kept" in row else "",
    ]
    if any(extra):
        parts.append(Text(" · ".join(e for e in extra if e), style="dim"))
    if row.get("error"):
        kind, message = error_kind_and_message(row)
        parts.append(Text(f"error ({kind}): {message}", style="bold red"))
    for label, messages in (("prompt", row.get("prompt")), ("completion", row.get("completion"))):
        parts.append(Text(f"\n── {label} ──", style="bold cyan"))
        for message in [messages] if isinstance(messages, str) else messages or []:
            parts.extend(_message_lines(message))
    if row.get("answer") not in (None, ""):
        parts.append(Text(f"\nanswer: {text_of(row.get('answer'))}", style="green"))
    return Group(*parts)


def candidate_view(row: Row) -> RenderableType:
    parts: list[RenderableType] = [
        Text(f"candidate {row['idx']}{' (best)' if row['is_best'] else ''}", style="bold"),
        Text(
            f"validation score {_fmt(row['reward'])} · found at call {row['calls']} · parents {row['parents']}",
            style="bold green",
        ),
        Text("per validation example: " + ", ".join(f"{k}: {v:.2f}" for k, v in row["subscores"].items()), style="dim"),
        Text("\n── system prompt ──", style="bold cyan"),
        Text(row["prompt_text"]),
    ]
    return Group(*parts)


def _message_lines(message: Any) -> list[RenderableType]:
    if not isinstance(message, dict):
        return [Text(str(message))]
    role = str(message.get("role") or "?")
    style = {"assistant": "magenta", "user": "blue", "system": "dim", "tool": "yellow"}.get(role, "")
    line = Text(f"{role}: ", style=f"bold {style}")
    line.append(text_of(message.get("content")))
    lines: list[RenderableType] = [line]
    for call in message.get("tool_calls") or []:
        function = call.get("function", call) if isinstance(call, dict) else {}
        lines.append(
            Text(f"  ↳ tool call {function.get('name', '?')}({function.get('arguments', '')})", style="yellow")
        )
    return lines


def _preview(row: Row) -> str:
    completion = row.get("completion") or []
    last = completion if isinstance(completion, str) else completion[-1] if completion else {}
    text = text_of(last.get("content")) if isinstance(last, dict) else str(last)
    if not text and isinstance(last, dict) and last.get("tool_calls"):
        text = "[tool calls]"
    text = " ".join(text.split())
    return text[:60] + ("…" if len(text) > 60 else "")


def _fmt(value: Any, digits: int = 3) -> str:
    try:
        return f"{float(value):.{digits}f}"
    except (TypeError, ValueError):
        return "n/a"


class RunsBrowser(App):
    """The app: starts on the runs list of ``output_dir``."""

    TITLE = "prime eval tui"

    def __init__(self, output_dir: str | Path = "outputs"):
        super().__init__()
        self.output_dir = Path(output_dir)
        self._warnings = _NotifyHandler(self)

    def on_mount(self) -> None:
        # damaged run files are skipped with a warning (evalkit.core.readback); on the screen, not stderr
        logging.getLogger(readback.logger.name).addHandler(self._warnings)
        self.push_screen(RunListScreen(self.output_dir))

    def on_unmount(self) -> None:
        logging.getLogger(readback.logger.name).removeHandler(self._warnings)


class _NotifyHandler(logging.Handler):
    """Shows log records (the readers' warnings about damaged files) as notifications of ``app``."""

    def __init__(self, app: App):
        super().__init__(logging.WARNING)
        self.app = app

    def emit(self, record: logging.LogRecord) -> None:
        self.app.notify(record.getMessage(), severity="warning", timeout=15)
