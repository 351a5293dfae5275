"""`prime rl run`."""

from __future__ import annotations

import typer

from gepa_cli.errors import not_available

app = typer.Typer(help="Baseline checks, then RL fine-tuning.", no_args_is_help=True)


@app.command("run")
def run(config: str = typer.Argument(..., help="An RL TOML config.")) -> None:
    """Check the baseline, then train the model on the environment."""
    raise not_available("prime rl run")
