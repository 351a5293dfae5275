"""Derived schemas: a file's top level (or a ``[gepa]`` table) accepts the same keys as the job config, each
optional, so that what the file leaves out falls back to the flags and the defaults. Derived, not re-typed: a
field added to a group is a file key at once, with the same type, validator bounds and description."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, create_model
from pydantic.fields import FieldInfo


def all_optional(name: str, *groups: type[BaseModel], exclude: frozenset[str] = frozenset(),
                 only: frozenset[str] | None = None, base: type[BaseModel] | None = None) -> type[BaseModel]:
    """A model with every field of ``groups`` (``only`` those named, never ``exclude``) as ``T | None = None``,
    keeping each field's constraints and description; ``base`` adds its own fields and validators (unknown keys
    stay rejected either way)."""
    fields: dict[str, Any] = {}
    for group in groups:
        for key, info in group.model_fields.items():
            if key in exclude or key in fields or (only is not None and key not in only):
                continue
            if base is not None and key in base.model_fields:
                continue
            optional = FieldInfo.merge_field_infos(info, default=None, default_factory=None)
            optional.annotation = info.annotation | None  # type: ignore[operator]
            fields[key] = (optional.annotation, optional)
    if base is None:
        return create_model(name, __config__=ConfigDict(extra="forbid"), **fields)
    return create_model(name, __base__=base, **fields)


def description_text(field: FieldInfo) -> str:
    """A field's description in one line of plain text: Sphinx roles become their target's last name, double
    backquotes plain text (help text is read in a terminal, not rendered)."""
    text = " ".join((field.description or "").split())
    text = re.sub(r":\w+:`~?([^`]+)`", lambda m: m.group(1).rsplit(".", 1)[-1], text)
    return text.replace("``", "")


def shared_fields(config: BaseModel, *groups: type[BaseModel]) -> dict[str, Any]:
    """The values ``config`` holds for the fields of ``groups``: one job handing its shared knobs to another (RL's
    periodic evals get the run's rollout bounds and concurrency) without naming each."""
    return {key: getattr(config, key) for group in groups for key in group.model_fields}
