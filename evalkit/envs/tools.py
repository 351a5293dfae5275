"""Python callables as OpenAI tools: JSON schema from the signature and the docstring.

The docstring's first paragraph becomes the tool description; an ``Args:`` section
(``name: description`` lines, Google style) gives parameter descriptions. Parameters without a
default are required. Supported annotations: str, int, float, bool, list[...], dict, Optional/``| None``,
``Literal[...]``; anything else is described as a string.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable
from typing import Any, Literal

_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object"}


def tool_schema(func: Callable[..., Any]) -> dict[str, Any]:
    """The OpenAI ``{"type": "function", "function": {...}}`` schema of ``func``."""
    doc = inspect.getdoc(func) or ""
    description, arg_docs = _parse_docstring(doc)
    hints = typing.get_type_hints(func)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, param in inspect.signature(func).parameters.items():
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        prop = _json_type(hints.get(name, str))
        if name in arg_docs:
            prop["description"] = arg_docs[name]
        properties[name] = prop
        if param.default is inspect.Parameter.empty:
            required.append(name)
    return {
        "type": "function",
        "function": {
            "name": func.__name__,
            "description": description or func.__name__,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


def _json_type(annotation: Any) -> dict[str, Any]:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation in _SIMPLE:
        return {"type": _SIMPLE[annotation]}
    if origin is Literal:
        return {"type": _SIMPLE.get(type(args[0]), "string"), "enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        non_null = [a for a in args if a is not type(None)]
        return _json_type(non_null[0]) if len(non_null) == 1 else {"type": "string"}
    if origin in (list, tuple, set) or annotation in (list, tuple, set):
        return {"type": "array", "items": _json_type(args[0]) if args else {}}
    if origin is dict:
        return {"type": "object"}
    return {"type": "string"}


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    sections = re.split(r"\n\s*\n", doc.strip(), maxsplit=1) if doc else [""]
    description = " ".join(sections[0].split()) if not sections[0].lstrip().startswith("Args:") else ""
    arg_docs: dict[str, str] = {}
    match = re.search(r"Args:\s*\n(.*?)(?:\n\s*\n|\n\S|\Z)", doc, re.DOTALL)
    if match:
        current = None
        for line in match.group(1).splitlines():
            item = re.match(r"\s*(\w+)\s*(?:\([^)]*\))?:\s*(.*)", line)
            if item:
                current = item.group(1)
                arg_docs[current] = item.group(2).strip()
            elif current and line.strip():
                arg_docs[current] += " " + line.strip()
    return description, arg_docs
