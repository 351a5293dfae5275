"""A request body read as JSON, refusing what Python's parser or a tokenizer would fail on later.

``json.loads`` raises ``RecursionError`` for a body nested a few thousand levels deep and a plain
``ValueError`` for an integer of more than 4,300 digits (CPython's int-to-string guard): neither is a
``JSONDecodeError``, so a server that catches only that answers 500 with a traceback in its log. A
string holding a lone UTF-16 surrogate (``"\\ud800"``, valid JSON) cannot be encoded as UTF-8, and
the tokenizer fails on it with an internal type error. Each is a :class:`~evalkit.clients.wire.WireError`
here, which the server answers 400.
"""

from __future__ import annotations

import json
from typing import Any

from evalkit.clients.wire import WireError


def parse_body(body: bytes) -> Any:
    """The parsed JSON body (``{}`` when empty); :class:`WireError` when it is not JSON Python can hold."""
    try:
        return json.loads(body or b"{}")
    except RecursionError:
        raise WireError("the request body nests too deeply; send a flatter JSON object") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise WireError(f"the request body is not valid JSON: {_first_line(exc)}") from None
    except ValueError:  # CPython's guard against integers of more than 4,300 digits
        raise WireError("the request body is not valid JSON here: it holds a number of more than 4300 digits") from None


def check_text(value: Any) -> None:
    """:class:`WireError` naming the first string (or key) in ``value`` that holds a lone surrogate.

    Walked with an explicit stack: the parser already bounded the depth, but a recursive walk of a
    body near that bound could exceed the interpreter's own recursion limit."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, str):
            if _has_surrogate(node):
                where = path.lstrip(".") or "the body"
                raise WireError(
                    f"{where} holds a lone UTF-16 surrogate, which is not valid Unicode text; "
                    "send each surrogate with its pair (or the character itself)",
                    where.split("[")[0].split(".")[0],
                )
        elif isinstance(node, dict):
            for key, item in reversed(list(node.items())):
                stack.append((f"{path}.{key}", key))
                stack.append((f"{path}.{key}", item))
        elif isinstance(node, list):
            stack.extend((f"{path}[{index}]", item) for index, item in reversed(list(enumerate(node))))


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
