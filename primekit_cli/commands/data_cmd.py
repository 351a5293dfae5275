"""`prime data from-eval`: training data from finished eval runs (rollouts that scored well, for SFT)."""

from __future__ import annotations

from pathlib import Path

import typer

from primekit_cli.errors import user_errors

app = typer.Typer(help="Build training data from runs.", no_args_is_help=True, rich_markup_mode="markdown")


@app.command("from-eval")
@user_errors
def from_eval(
    run_dirs: list[Path] = typer.Argument(
        ..., metavar="RUN_DIR...", help="Eval run dirs (results.jsonl + metadata.json)."
    ),
    output: Path = typer.Option(
        ...,
        "--output",
        "-o",
        help="The JSONL dataset to write (prompt, completion, tools, "
        "provenance); a symlink is followed. Never inside a RUN_DIR.",
    ),
    min_reward: float = typer.Option(
        1.0, "--min-reward", help="Keep rollouts that scored at least this (errored ones never)."
    ),
    best_of_group: bool = typer.Option(
        False, "--best-of-group", help="Keep only the best rollout of each example (ties: the first)."
    ),
    keep_truncated: bool = typer.Option(
        False,
        "--keep-truncated",
        help="Also keep rollouts cut off at the token limit "
        "(left out by default: a cut-off completion teaches stopping mid-answer).",
    ),
    force: bool = typer.Option(False, "--force", help="Replace an existing -o file."),
) -> None:
    """The rollouts of eval runs that scored at least --min-reward, as a chat dataset for SFT."""
    from rich.console import Console

    from evalkit.eval.sft_dataset import write_sft_dataset

    done = write_sft_dataset(run_dirs, output, min_reward=min_reward, best_of_group=best_of_group,
                             keep_truncated=keep_truncated, force=force)
    left = (
        f"{done.errored} errored, "
        + ("" if keep_truncated else f"{done.truncated} truncated, ")
        + f"{done.below} below {min_reward:g}"
        + (f", {done.not_best} not best of their group" if best_of_group else "")
    )
    Console().print(f"wrote {done.written} of {done.rollouts} rollouts to {done.path} ({left})", soft_wrap=True,
                    markup=False, highlight=False)
