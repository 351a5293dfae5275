"""The env-check report as one rich table (a person) or JSON (CI)."""

from __future__ import annotations

import json

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from evalkit.envcheck.run import EnvCheckReport

_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


def report_table(report: EnvCheckReport) -> Table:
    low, high = report.reward_range
    table = Table(title=f"env check · {escape(report.env_id)} · reward range [{low:g}, {high:g}]", title_justify="left")
    for column in ("check", "verdict", "what it saw", "example"):
        table.add_column(column, overflow="fold")
    for check in report.checks:
        style = _STYLE.get(check.status, "")
        where = "" if check.example_id is None else f"#{check.example_id}: {check.example or ''}"
        table.add_row(check.name, f"[{style}]{check.status}[/{style}]", escape(check.detail), escape(where))
    return table


def print_report(report: EnvCheckReport, console: Console, as_json: bool = False) -> None:
    if as_json:
        console.print_json(json.dumps(report.to_dict()))
        return
    console.print(report_table(report))
    counts = {s: sum(1 for c in report.checks if c.status == s) for s in _STYLE}
    verdict = "[bold red]FAILED[/bold red]" if report.failed else "[green]passed[/green]"
    console.print(
        f"{verdict}: {counts['pass']} pass, {counts['warn']} warn, {counts['fail']} fail, {counts['skip']} skipped"
    )
