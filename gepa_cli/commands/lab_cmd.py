"""`prime lab setup`."""

from __future__ import annotations

import typer

from gepa_cli.errors import not_available

app = typer.Typer(help="Set up a working folder with example configs.", no_args_is_help=True)


@app.command("setup")
def setup() -> None:
    """Write example configs into ./configs."""
    raise not_available("prime lab setup")
