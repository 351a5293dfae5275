"""The command-line options that several commands share, each declared once.

An option's help text is its config field's docstring (:mod:`evalkit.vocabulary`) and its ``[default: ...]`` is
the field's default, so ``--help``, the TOML keys and the config classes cannot drift apart. Every option here
defaults to ``None`` (not given), so a TOML's value or the field's default stays; :func:`given` turns the options
a command received into typed config fields (validated by the config's all-optional twin, one ``error:`` line for
a bad value).

Adding a shared knob: one field in a group of :mod:`evalkit.vocabulary`, one alias here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from pydantic import BaseModel

from evalkit.vocabulary import ConcurrencyFields, EnvFields, ModelFields, RolloutBounds, SecretsFields, field_help
from primekit_cli.commands.model_help import MODEL_HELP


def option(group: type[BaseModel], key: str, *names: str, help: str | None = None, extra: str = "") -> Any:
    """A ``typer.Option`` (default ``None``) for ``group``'s field ``key``: its help is the field's docstring (or
    ``help``) plus ``extra``, then the field's default."""
    info = group.model_fields[key]
    default = info.get_default(call_default_factory=True)
    shown = f" [default: {default:g}]" if isinstance(default, float) else (
        f" [default: {default}]" if default not in (None, {}, []) else "")
    text = (help or field_help(group, key)) + (f" {extra}" if extra else "") + shown
    return typer.Option(*names, help=text, show_default=False)


Model = Annotated[Optional[str], option(ModelFields, "model", "--model", "-m", help=MODEL_HELP)]
ApiBaseUrl = Annotated[Optional[str], option(ModelFields, "base_url", "--api-base-url", "-b")]
ApiKeyVar = Annotated[Optional[str], option(ModelFields, "api_key_var", "--api-key-var", "-k")]
EndpointsPath = Annotated[Optional[str], option(ModelFields, "endpoints_path", "--endpoints-path", "-e")]
MaxRetries = Annotated[Optional[int], option(ModelFields, "max_retries", "--max-retries")]
Timeout = Annotated[Optional[float], option(
    ModelFields, "timeout", "--timeout",
    extra="(vf-eval's --timeout bounds a whole rollout: that is --rollout-timeout here.)")]
Device = Annotated[Optional[str], option(ModelFields, "device", "--device")]

RolloutTimeout = Annotated[Optional[float], option(RolloutBounds, "rollout_timeout", "--rollout-timeout")]
ScoreTimeout = Annotated[Optional[float], option(RolloutBounds, "score_timeout", "--score-timeout")]
MaxMessageChars = Annotated[Optional[int], option(RolloutBounds, "max_message_chars", "--max-message-chars")]

MaxConcurrent = Annotated[Optional[int], option(ConcurrencyFields, "max_concurrent", "--max-concurrent", "-c")]

EnvArgs = Annotated[Optional[str], typer.Option(
    "--env-args", "-a", show_default=False,
    help="Environment args as JSON, e.g. '{\"difficulty\": \"easy\"}'; a verifiers v1 taskset also takes "
         "'{\"taskset\": {...}, \"harness\": {\"max_turns\": 8}}'. Its seats run verifiers' null chat program "
         "(verifiers' own default is bash); '{\"harness\": {\"id\": \"bash\"}, \"runtime\": {\"type\": "
         "\"sandbox\"}}' runs verifiers' bash harness, which executes the model's shell commands on this machine, "
         "so it runs only with the runtime chosen explicitly (--env.agent.runtime.type sandbox: in a bubblewrap "
         "sandbox; subprocess: as you, with your files).")]
ExtraEnvKwargs = Annotated[Optional[str], typer.Option(
    "--extra-env-kwargs", "-x", show_default=False,
    help="JSON of settings applied to the loaded environment (set_<key> or an attribute).")]
SamplingArgs = Annotated[Optional[str], typer.Option(
    "--sampling-args", "-S", show_default=False,
    help="Sampling args as JSON, e.g. '{\"top_p\": 0.9}'; its keys override -t/-T where a command has them.")]
EnvFile = Annotated[Optional[list[Path]], option(
    SecretsFields, "env_file", "--env-file",
    extra="Repeatable; added to the config's env_file.")]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Log retries and request details (never keys).")]


def env_dir_path_option(*names: str) -> Any:
    """``--env-dir-path`` (vf-eval has no short form; verifiers' GEPA script spells it ``-p``)."""
    return Annotated[Optional[str], option(EnvFields, "env_dir_path", "--env-dir-path", *names)]


EnvDirPath = env_dir_path_option()


def given(config: type[BaseModel], source: str = "command line", **flags: Any) -> dict[str, Any]:
    """The flags a command received (``None``: not given), as typed fields of ``config``: each checked against
    the field's type and bounds now, so a bad value is one ``error:`` line naming the flag's key."""
    from evalkit.core.tomlio import validate
    from evalkit.vocabulary import all_optional

    values = {key: value for key, value in flags.items() if value is not None}
    unknown = sorted(set(values) - set(config.model_fields))
    if unknown:
        raise TypeError(f"{config.__name__} has no field {unknown[0]!r}")  # a programming error, not the user's
    checked = validate(all_optional(f"{config.__name__}Flags", config, only=frozenset(values)), values, source)
    return checked.model_dump(exclude_unset=True)
