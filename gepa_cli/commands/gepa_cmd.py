"""`prime gepa run`."""

from __future__ import annotations

import typer

from gepa_cli.errors import not_available

app = typer.Typer(help="Optimize an environment's system prompt with GEPA.", no_args_is_help=True)


@app.command("run")
def run(env_or_config: str = typer.Argument(..., help="Environment id or a GEPA TOML config.")) -> None:
    """Optimize the system prompt with reflection and a Pareto frontier."""
    raise not_available("prime gepa run")
