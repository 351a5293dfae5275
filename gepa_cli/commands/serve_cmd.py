"""`prime serve`."""

from __future__ import annotations

from gepa_cli.errors import not_available


def serve() -> None:
    """Serve the embedded model as an OpenAI-compatible HTTP server."""
    raise not_available("prime serve")
