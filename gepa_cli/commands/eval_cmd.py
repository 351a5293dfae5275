"""`prime eval run|view`."""

from __future__ import annotations

import typer

from gepa_cli.errors import not_available

app = typer.Typer(help="Score a model on an environment.", no_args_is_help=True)


@app.command("run")
def run(env_or_config: str = typer.Argument(..., help="Environment id or an eval TOML config.")) -> None:
    """Run a model on an environment: rollouts, rewards, summary."""
    raise not_available("prime eval run")


@app.command("view")
def view(run_dir: str = typer.Argument(None, help="A run directory (default: the newest).")) -> None:
    """Show a report of a finished eval run."""
    raise not_available("prime eval view")
