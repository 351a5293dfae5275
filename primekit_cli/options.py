"""Command-line flags: one way a config field becomes a flag, and the few options that are no field.

A command lists its field flags in a :class:`FlagTable`: the field's name and its short names
(``flag("num_examples", "-n")``), or another spelling where verifiers and the prime CLI use one
(``flag("base_url", "--api-base-url", "-b")``). The flag's help is the field's docstring (plus its choices and an
``extra=`` for what only the command line needs saying), its ``[default: ...]`` the field's default, so ``--help``,
the TOML keys and the config classes cannot drift apart. :func:`field_flags` adds the table's options to a typer
command and hands it the values the user gave as one dict, keyed by field name (absent: not given, so a TOML's value
or the field's default stays), each checked against its field now: a bad value is one ``error:`` line naming the key.

Only what is no field is hand-written here or in the command: JSON blobs (``-S``, ``-a``, ``-x``), files,
``--dry-run``, ``--verbose``. A table names such a parameter by its name where it goes, so ``--help`` lists the
options in the order the table gives.

Adding a shared knob: one field in a group of :mod:`evalkit.vocabulary`, one ``flag(...)`` line in each command's
table that offers it.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from evalkit.core.errors import UserError
from evalkit.vocabulary.optional import description_text


@dataclass(frozen=True)
class Flag:
    """One config field as a command-line option (built by :func:`flag` or :func:`group_flags`)."""

    key: str
    names: tuple[str, ...] = ()
    """Its spellings; without a long one, ``--key-with-dashes`` comes first."""
    extra: str = ""
    """Help the command line needs beyond the field's docstring (e.g. which of two flags wins)."""
    of: type[BaseModel] | None = None
    """The class declaring the field; ``None``: the table's config."""
    cli: Any = None
    """The option's type when not the field's (``str`` for a comma-separated list, ``list[Path]`` for a repeatable
    file)."""
    metavar: str | None = None
    negatable: bool = True
    """A bool field's flag has a ``--no-`` twin unless this is false."""
    panel: str | None = None

    @property
    def field(self) -> FieldInfo:
        assert self.of is not None, "a Flag outside a FlagTable has no class"
        return self.of.model_fields[self.key]

    @property
    def long(self) -> str:
        return next(name for name in self.spellings if name.startswith("--"))

    @property
    def spellings(self) -> tuple[str, ...]:
        if any(name.startswith("--") for name in self.names):
            return self.names
        return ("--" + self.key.replace("_", "-"), *self.names)


def flag(key: str, *names: str, extra: str = "", of: type[BaseModel] | None = None, cli: Any = None,
         metavar: str | None = None, negatable: bool = True, panel: str | None = None) -> Flag:
    """The field ``key`` (of ``of``, else of the table's config) as an option named ``names``."""
    return Flag(key, names, extra, of, cli, metavar, negatable, panel)


def group_flags(group: type[BaseModel], panel: str | None = None) -> list[Flag]:
    """Every field of ``group``, in its order, as ``--field-name`` (GEPA's search knobs, its tracking shortcuts)."""
    return [Flag(key, of=group, panel=panel) for key in group.model_fields]


class FlagTable:
    """A command's options in ``--help`` order: :class:`Flag` entries, and the names of the command's own
    (hand-written) parameters where they go."""

    def __init__(self, config: type[BaseModel], *entries: Flag | str | list[Flag]) -> None:
        self.entries: list[Flag | str] = []
        for entry in entries:
            for one in entry if isinstance(entry, list) else [entry]:
                if isinstance(one, Flag):
                    one = one if one.of is not None else replace(one, of=config)
                    if one.key not in one.of.model_fields:  # type: ignore[union-attr]
                        raise TypeError(f"{one.of.__name__} has no field {one.key!r}")  # type: ignore[union-attr]
                self.entries.append(one)

    @property
    def flags(self) -> list[Flag]:
        return [entry for entry in self.entries if isinstance(entry, Flag)]


def _base(annotation: Any) -> Any:
    """``X | None`` -> ``X``; anything else as it is."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return annotation


def _choices(field: FieldInfo) -> tuple[Any, ...]:
    base = _base(field.annotation)
    return typing.get_args(base) if typing.get_origin(base) is Literal else ()


def _is_names(field: FieldInfo) -> bool:
    """A list of names: given as ``a,b`` on the command line."""
    return _base(field.annotation) == list[str]


def _is_json(field: FieldInfo) -> bool:
    base = _base(field.annotation)
    return typing.get_origin(base) is not Literal and base not in (bool, int, float, str) and not _is_names(field)


def _cli_type(entry: Flag) -> Any:
    if entry.cli is not None:
        return entry.cli
    base = _base(entry.field.annotation)
    return base if base in (bool, int, float) else str


def shown_default(field: FieldInfo) -> str | None:
    """The field's default as ``--help`` shows it, or ``None`` where it has none worth showing (unset, empty)."""
    default = field.get_default(call_default_factory=True)
    if default in (None, {}, []):
        return None
    if isinstance(default, float):
        return f"{default:g}"
    if isinstance(default, list):  # as the flag takes it: a,b
        return ",".join(map(str, default))
    return json.dumps(default) if isinstance(default, dict) else str(default)


def help_text(entry: Flag) -> str:
    """The field's docstring (``<name>`` placeholders as ``NAME``: markdown would drop them), its choices, the
    entry's ``extra`` and the field's default."""
    text = re.sub(r"<([A-Za-z][A-Za-z0-9-]*)>", lambda m: m.group(1).upper().replace("-", "_"),
                  description_text(entry.field))  # what markdown would take for a tag; <curr_param> stays
    choices = _choices(entry.field)
    if choices:
        text += f" One of: {', '.join(map(str, choices))}."
    if entry.extra:
        text += f" {entry.extra}"
    default = shown_default(entry.field)
    return text + (f" [default: {default}]" if default is not None else "")


def _parameter(entry: Flag) -> inspect.Parameter:
    kind = _cli_type(entry)
    names = list(entry.spellings)
    if kind is bool and entry.negatable:
        names[names.index(entry.long)] = f"{entry.long}/--no-{entry.long[2:]}"
    metavar = entry.metavar
    if metavar is None and entry.cli is None:
        metavar = "A,B" if _is_names(entry.field) else "JSON" if _is_json(entry.field) else None
    extra = {"rich_help_panel": entry.panel} if entry.panel else {}
    option = typer.Option(None, *names, help=help_text(entry), show_default=False, metavar=metavar, **extra)
    return inspect.Parameter(entry.key, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=Optional[kind])  # noqa: UP045  (typer reads it at run time)


def _value(entry: Flag, raw: Any) -> Any:
    """The option's value as the field takes it: ``a,b`` (or repeated) names as a list, JSON parsed, paths as text."""
    if isinstance(raw, list):
        raw = [str(item) if isinstance(item, Path) else item for item in raw]
    if _is_names(entry.field) and entry.cli in (None, str, list[str]):
        parts = raw if isinstance(raw, list) else [raw]
        return [name.strip() for part in parts for name in part.split(",") if name.strip()]
    if entry.cli is None and _is_json(entry.field):
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise UserError(f"{entry.long}: not valid JSON ({exc.msg}): {raw!r}") from None
    return raw


def checked(table: FlagTable, raw: dict[str, Any], source: str = "command line") -> dict[str, Any]:
    """The given options (``None``: not given) as typed field values, each checked against its field's type and
    bounds by the class's all-optional twin, so a bad value is one ``error:`` line naming the key."""
    from evalkit.core.tomlio import validate
    from evalkit.vocabulary import all_optional

    given = {entry.key: (entry, _value(entry, raw[entry.key])) for entry in table.flags
             if raw.get(entry.key) is not None}
    out: dict[str, Any] = {}
    for owner in dict.fromkeys(entry.of for entry, _ in given.values()):
        values = {key: value for key, (entry, value) in given.items() if entry.of is owner}
        model = all_optional(f"{owner.__name__}Flags", owner, only=frozenset(values))  # type: ignore[arg-type]
        out.update(validate(model, values, source).model_dump(exclude_unset=True))
    return out


def field_flags(table: FlagTable, into: str = "given") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add ``table``'s options to a command; the command gets the given field values as ``into={field: value}``.

    The command's parameters that the table does not name (its context, its arguments) come first; the rest go
    where the table names them."""
    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(func)
        hints = typing.get_type_hints(func, include_extras=True)  # in func's module: Annotated options keep their flags
        own = {p.name: p.replace(annotation=hints.get(p.name, p.annotation)) for p in signature.parameters.values()
               if p.name != into}
        placed = [entry for entry in table.entries if isinstance(entry, str)]
        missing = sorted(set(placed) - set(own))
        clash = sorted({entry.key for entry in table.flags} & set(own))
        if missing or clash:
            raise TypeError(f"{func.__name__}: table names {missing} it lacks; parameters {clash} are field flags")
        params = [p for name, p in own.items() if name not in placed]
        keyword = inspect.Parameter.KEYWORD_ONLY
        params += [own[entry].replace(kind=keyword) if isinstance(entry, str) else _parameter(entry)
                   for entry in table.entries]
        keys = [entry.key for entry in table.flags]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            raw = {key: kwargs.pop(key, None) for key in keys}
            return func(*args, **kwargs, **{into: checked(table, raw)})

        wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        wrapper.flag_table = table  # type: ignore[attr-defined]  # for tests that compare --help with the fields
        return wrapper

    return decorate


# --- the options that are no field, shared by eval and GEPA ---------------------------------------------------------

EnvArgs = Annotated[str | None, typer.Option(
    "--env-args", "-a", show_default=False,
    help="Environment args as JSON, e.g. '{\"difficulty\": \"easy\"}'; a verifiers v1 taskset also takes "
         "'{\"taskset\": {...}, \"harness\": {\"max_turns\": 8}}'. Its seats run verifiers' null chat program "
         "(verifiers' own default is bash); '{\"harness\": {\"id\": \"bash\"}, \"runtime\": {\"type\": "
         "\"sandbox\"}}' runs verifiers' bash harness, which executes the model's shell commands on this machine, "
         "so it runs only with the runtime chosen explicitly (--env.agent.runtime.type sandbox: in a bubblewrap "
         "sandbox; subprocess: as you, with your files).")]
ExtraEnvKwargs = Annotated[str | None, typer.Option(
    "--extra-env-kwargs", "-x", show_default=False,
    help="JSON of settings applied to the loaded environment (set_<key> or an attribute).")]
SamplingArgs = Annotated[str | None, typer.Option(
    "--sampling-args", "-S", show_default=False,
    help="Sampling args as JSON, e.g. '{\"top_p\": 0.9}'; its keys override -t/-T where a command has them.")]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Log retries and request details (never keys).")]


# --- the shared knobs' flags (the same spelling in every command that offers them) ----------------------------------

MODEL = flag("model", "-m", extra="(see 'Models' below)")
BASE_URL = flag("base_url", "--api-base-url", "-b")
API_KEY_VAR = flag("api_key_var", "-k")
ENDPOINTS_PATH = flag("endpoints_path", "-e")
MAX_RETRIES = flag("max_retries")
TIMEOUT = flag("timeout", extra="(vf-eval's --timeout bounds a whole rollout: that is --rollout-timeout here.)")
DEVICE = flag("device")
ROLLOUT_TIMEOUT = flag("rollout_timeout")
SCORE_TIMEOUT = flag("score_timeout")
MAX_MESSAGE_CHARS = flag("max_message_chars")
MAX_CONCURRENT = flag("max_concurrent", "-c")
ENV_FILE = flag("env_file", cli=list[Path], extra="Repeatable; added to the config's env_file.")


def _trainer_device() -> Flag:
    from rl_backend.config import OptimizerFields

    return flag("device", of=OptimizerFields, extra="(the config's trainer.device)")


TRAINER_DEVICE = _trainer_device()
"""RL's and SFT's ``--device``: the ``[trainer]`` table's field, given as ``--trainer.device``."""


def trainer_overrides(given: dict[str, Any]) -> list[str]:
    """The dotted overrides that the trainer's field flags (:data:`TRAINER_DEVICE`) stand for."""
    return ["--trainer.device", given["device"]] if "device" in given else []
