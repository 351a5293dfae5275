"""`prime env list|init|install`."""

from __future__ import annotations

import typer

from gepa_cli.errors import not_available

app = typer.Typer(help="List, create and install environments.", no_args_is_help=True)


@app.command("list")
def list_envs() -> None:
    """List built-in and local environments."""
    raise not_available("prime env list")
