"""Tool descriptions as text that can be replaced: what GEPA optimizes and ``--tools-file`` applies.

A native :class:`~evalkit.envs.tool_env.ToolEnv` describes each tool to the model with the first
paragraph of its docstring. Those descriptions are a prompt like the system prompt, so they can be
rewritten without touching the tools: :func:`apply_descriptions` replaces them for a whole run (``prime
eval run --tools-file``), and :data:`TOOL_DESCRIPTIONS` for the rollouts started inside one context
(GEPA scores several candidates at once, each with its own descriptions, on one environment object).
A mapping names tools by their function name; a tool it leaves out keeps its own description.
"""

from __future__ import annotations

import copy
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from evalkit.core.errors import UserError

TOOL_DESCRIPTIONS: ContextVar[dict[str, str] | None] = ContextVar("tool_descriptions", default=None)
"""Descriptions for the tools of rollouts started in this context (asyncio tasks copy it when created)."""


def describe(schemas: list[dict[str, Any]], descriptions: dict[str, str]) -> list[dict[str, Any]]:
    """Copies of OpenAI tool ``schemas`` with the named tools' descriptions replaced."""
    out = []
    for schema in schemas:
        name = schema.get("function", {}).get("name")
        if name in descriptions:
            schema = copy.deepcopy(schema)
            schema["function"]["description"] = descriptions[name]
        out.append(schema)
    return out


def descriptions_of(env: Any) -> dict[str, str]:
    """``{tool name: description}`` of an environment's ``tool_schemas`` (a native tool environment, a legacy
    verifiers ``vf.ToolEnv``, a v1 taskset's MCP tools; empty for any other environment)."""
    return schema_descriptions(getattr(env, "tool_schemas", None) or [])


def schema_descriptions(schemas: list[dict[str, Any]]) -> dict[str, str]:
    """``{tool name: description}`` of OpenAI tool ``schemas``."""
    return {s["function"]["name"]: str(s["function"].get("description") or "") for s in schemas if "function" in s}


def check_descriptions(descriptions: Any, known: dict[str, str], source: str) -> dict[str, str]:
    """``descriptions`` when it is a JSON object of non-empty strings naming known tools; else UserError."""
    if not isinstance(descriptions, dict) or not descriptions:
        raise UserError(f"{source}: expected a JSON object {{\"tool name\": \"description\"}}")
    unknown = sorted(set(descriptions) - set(known))
    if unknown:
        raise UserError(f"{source}: no tool named {', '.join(map(repr, unknown))} in this environment "
                        f"(its tools: {', '.join(known) or 'none'})")
    bad = [name for name, text in descriptions.items() if not isinstance(text, str) or not text.strip()]
    if bad:
        raise UserError(f"{source}: the description of {', '.join(map(repr, bad))} must be non-empty text")
    return {str(k): str(v) for k, v in descriptions.items()}


def apply_descriptions(env: Any, descriptions: dict[str, str], source: str) -> None:
    """Replace ``env``'s tool descriptions for every later rollout (``prime eval run --tools-file``)."""
    known = descriptions_of(env)
    if not known:
        raise UserError(f"{source}: the environment has no tools whose descriptions could be replaced")
    env.tool_schemas = describe(env.tool_schemas, check_descriptions(descriptions, known, source))


def read_tools_file(path: str | Path) -> dict[str, Any]:
    """The JSON object in a ``tools.json`` (as GEPA writes it); UserError when it is not one."""
    from evalkit.core.fileio import read_user_text
    from evalkit.core.json_args import parse_json_object

    return parse_json_object(read_user_text(Path(path), "--tools-file"), f"--tools-file {path}")
