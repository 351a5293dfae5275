"""JSON objects given on the command line (``-a``, ``-S``, ``-x``) or read from a small file (``--tools-file``).

A bottom-layer helper: configs, environment loading and the CLI all parse these, and none of them should import
another to do it.
"""

from __future__ import annotations

import json
from typing import Any

from evalkit.core.errors import UserError


def parse_json_object(raw: str | dict[str, Any] | None, what: str) -> dict[str, Any]:
    """A command-line JSON object (``-a``, ``-S``) -> dict; bad JSON or a non-object is a UserError naming ``what``."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, dict):
        return dict(raw)
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise UserError(f"{what} is not valid JSON ({exc.msg} at column {exc.colno}): {raw}") from exc
    if not isinstance(value, dict):
        raise UserError(f"{what} must be a JSON object like '{{\"key\": 1}}', got: {raw}")
    return value
