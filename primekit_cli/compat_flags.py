"""Flags of the anchors (verifiers' ``vf-eval`` and GEPA script, the ``prime`` CLI) that primekit does not
implement: each is either refused with an ``error:`` line that says what to use instead, or accepted as
a no-op when its meaning has no effect here (the reason is printed as a note and listed in ``--help``).

These are the tables; :mod:`primekit_cli.argv` applies them to a command line before click parses it (click
would otherwise answer "No such option" without a hint), with GEPA's greedy options (:data:`GEPA_GREEDY`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Refused:
    """An anchor flag primekit cannot honour; ``instead`` says what to do."""

    flags: tuple[str, ...]
    instead: str


@dataclass(frozen=True)
class NoOp:
    """An anchor flag (boolean) whose meaning has no effect in primekit; ``why`` says so."""

    flags: tuple[str, ...]
    why: str


HOSTED = ("--hosted", "--follow", "--poll-interval", "--timeout-minutes", "--allow-sandbox-access",
          "--allow-instances-access", "--allow-tunnel-access", "--custom-secrets", "--eval-name")
"""`prime eval run`'s options for evaluations hosted on Prime's platform."""

EVAL_REFUSED = (
    Refused(("--save-to-hf-hub", "-H", "--hf-hub-dataset-name", "-D"),
            "primekit uploads nothing; results stay in the run dir (results.jsonl, metadata.json), which "
            "datasets.load_dataset('json', data_files=...) reads. (An HTTP header is --header 'Name: Value'.)"),
    Refused(("--header-from-state",), "per-rollout headers taken from the rollout state are not supported; "
            "--header 'Name: Value' sends a fixed header"),
    Refused(("--fullscreen", "-f"), "there is no full-screen display: `prime eval run` shows a progress bar; "
            "browse results with `prime eval tui` or `prime eval view`"),
    Refused(("--num-workers", "-w"), "environments run inside this process (there are no env server workers); "
            "bound concurrency with -c/--max-concurrent"),
    Refused(("--heartbeat-url",), "primekit sends no heartbeats; the run dir's metadata.json (status, num_rollouts) "
            "shows progress"),
    Refused(HOSTED, "primekit runs evals on this machine only (there are no hosted evaluations); drop the flag"),
    Refused(("--env-path",), "pass the environment's folder as the environment (prime eval run ./path/to/my_env), "
            "or its parent folder as --env-dir-path"),
)

EVAL_NOOPS = (
    NoOp(("--no-interleave-scoring", "-N"), "the order of generation and scoring never changes results "
         "(vf-eval 0.3.1 parses this flag and ignores it too)"),
    NoOp(("--disable-tui", "-d"), "the display is already a plain progress bar and a summary (no TUI to disable)"),
    NoOp(("--abbreviated-summary", "-A"), "the summary never shows example prompts or completions "
         "(`prime eval view` does)"),
    NoOp(("--disable-env-server",), "environments always run inside this process; there is no env server"),
    NoOp(("--skip-upload",), "primekit never uploads results"),
)

GEPA_REFUSED = (
    Refused(("--no-save",), "a GEPA run always writes its run dir (the budget count and --resume depend on it); "
            "delete the folder afterwards if you do not want it"),
    Refused(("--tui", "-u"), "there is no full-screen display: `prime gepa run` shows a progress bar; "
            "look at a run with `prime eval view RUN_DIR`"),
)

GEPA_GREEDY = ("--state-columns",)
"""GEPA options that take several space-separated values (argparse's ``nargs="*"`` in the GEPA script)."""


def help_section(refused: Sequence[Refused], noops: Sequence[NoOp]) -> str:
    """The ``--help`` text listing accepted no-ops and refused flags."""
    lines: list[str] = []
    if noops:
        lines += ["Accepted with no effect here (flags of vf-eval / prime):"]
        lines += [f"  {'/'.join(n.flags)}: {n.why}" for n in noops]
    if refused:
        lines += [
            "Refused with an error that says what to use instead: " + ", ".join(f for r in refused for f in r.flags)
        ]
    return "\n" + "\n\n".join(lines) + "\n"
