"""Command-line flags derived from a pydantic field group: the field is the one declaration.

``@field_flags(Fields, into="name")`` adds one option per field of ``Fields`` to a typer command: the
flag is the field name with ``-`` for ``_`` (``use_merge`` -> ``--use-merge/--no-use-merge``), its
help the field's docstring plus its choices and default. The command receives the values the user
gave as one dict (parameter ``into``), keyed by field name, absent when not given, so they lay over a
TOML's keys and the defaults exactly as the hand-written flags do. Validation stays the model's: a bad
value fails when the job config is built, as one ``error:`` line naming the key.

Lists of names (``components``) take ``a,b``; dicts (``reflection_prices``) take JSON; everything else
takes its plain type.
"""

from __future__ import annotations

import functools
import inspect
import json
import types
import typing
from collections.abc import Callable
from typing import Any, Literal

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from evalkit.core.errors import UserError
from evalkit.vocabulary.optional import description_text


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def _base(annotation: Any) -> Any:
    """``X | None`` -> ``X``; anything else as it is."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return annotation


def _plain_type(annotation: Any) -> tuple[type, tuple[Any, ...]]:
    """``(the CLI type, the Literal's choices or ())`` of a field's annotation; JSON text is ``str``."""
    base = _base(annotation)
    if typing.get_origin(base) is Literal:
        return str, typing.get_args(base)
    if base in (bool, int, float, str):
        return base, ()
    return str, ()


def _is_json(field: FieldInfo) -> bool:
    base = _base(field.annotation)
    return typing.get_origin(base) is not Literal and base not in (bool, int, float, str)


def _help(field: FieldInfo, choices: tuple[Any, ...]) -> str:
    text = description_text(field)
    if choices:
        text += f" One of: {', '.join(map(str, choices))}."
    default = field.get_default(call_default_factory=True)
    if default not in (None, {}, []):
        text += f" [default: {default}]"
    return text


def _parameter(name: str, field: FieldInfo, panel: str) -> inspect.Parameter:
    kind, choices = _plain_type(field.annotation)
    flag = flag_name(name)
    decl = f"{flag}/--no-{flag[2:]}" if kind is bool else flag
    option = typer.Option(None, decl, help=_help(field, choices), show_default=False, rich_help_panel=panel,
                          metavar="A,B" if _is_names(field) else "JSON" if _is_json(field) else None)
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=typing.Optional[kind])


def _is_names(field: FieldInfo) -> bool:
    """A list of names: given as ``a,b`` on the command line."""
    return _base(field.annotation) == list[str]


def _value(name: str, field: FieldInfo, raw: Any) -> Any:
    if _is_names(field):
        return [part.strip() for part in raw.split(",") if part.strip()]
    if not _is_json(field):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise UserError(f"{flag_name(name)}: not valid JSON ({exc.msg}): {raw!r}") from None


def field_flags(fields: type[BaseModel], into: str,
                panel: str = "Search and stopping") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add ``fields``' flags to a command; the command gets the given ones as ``into={field: value}``."""
    declared = fields.model_fields

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(func)
        hints = typing.get_type_hints(func, include_extras=True)  # in func's module: Annotated options keep their flags
        params = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in signature.parameters.values()
                  if p.name != into]
        clash = set(declared) & {p.name for p in params}
        if clash:
            raise TypeError(f"{func.__name__} already has parameters {sorted(clash)}")
        added = [_parameter(name, field, panel) for name, field in declared.items()]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            given = {name: _value(name, declared[name], kwargs.pop(name)) for name in declared
                     if kwargs.get(name) is not None}
            for name in declared:
                kwargs.pop(name, None)
            return func(*args, **kwargs, **{into: given})

        wrapper.__signature__ = signature.replace(parameters=[*params, *added])  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in [*params, *added]}
        return wrapper

    return decorate
