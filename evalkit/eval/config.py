"""What one eval run is (``EvalConfig``) and the TOML file that lists several (``EvalFile``).

A TOML eval config (``configs/eval/*.toml``)::

    model = "qwen3-8b"            # top-level defaults for every [[eval]]
    num_examples = 20
    rollouts_per_example = 4
    [sampling]
    temperature = 0.7

    [[eval]]
    id = "reverse-text"
    args = { difficulty = "easy" }
    [eval.sampling]
    max_tokens = 256

Entries run one after the other, each into its own run dir. Unknown keys are rejected; relative
paths (output_dir, endpoints_path, system_prompt_file, local model folders) resolve against the
config file's folder.

A verifiers v1 taskset's settings also go in ``[eval.taskset]`` / ``[eval.harness]`` tables under an entry
(``[env.taskset]`` / ``[env.harness]`` under ``[[env]]`` in GEPA and RL configs), as the Lab's configs write them.

Keys as verifiers' ``vf-eval`` configs write them are accepted too: ``env_id``/``env_args`` beside
``id``/``args`` in ``[[eval]]`` (and a top-level ``env_args`` as every entry's defaults), a
``[sampling_args]`` table beside ``[sampling]``, and the sampling keys ``max_tokens``, ``temperature``
and ``top_p`` at the top level or in an entry. Setting one value both ways is an error.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from evalkit.clients.spec import ClientSpec
from evalkit.core.errors import ConfigError, UserError
from evalkit.core.redact import register_named_secrets
from evalkit.core.sampling_rules import check_sampling
from evalkit.core.tomlio import load_toml, validate
from evalkit.core.untrusted import utf8
from evalkit.vocabulary import ConcurrencyFields, EnvFields, ModelFields, RolloutBounds, SecretsFields, all_optional

DEFAULT_PASS_THRESHOLD = 1.0


class EvalConfig(ModelFields, RolloutBounds, ConcurrencyFields, EnvFields, SecretsFields):
    """One fully resolved eval: which environment, which model, how many rollouts, where to write. The shared
    knobs come from :mod:`evalkit.vocabulary`; these are eval's own."""

    env_id: str
    """Environment id or folder (see `prime env list`)."""
    env_args: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments for the environment's ``load_environment``."""

    @field_validator("env_args")
    @classmethod
    def _secrets_in_env_args(cls, value: dict[str, Any]) -> dict[str, Any]:
        register_named_secrets(value)  # a harness's env table: redacted everywhere from here on
        return value
    num_examples: int = 5
    """Examples to evaluate; -1 means all."""
    rollouts_per_example: int = Field(3, ge=1)
    """Rollouts per example (a group); pass@k is reported for k = 1..this."""
    sampling: dict[str, Any] = Field(default_factory=dict)
    """Sampling args (max_tokens, temperature, top_p, ...; other keys pass through to the server)."""
    system_prompt: str | None = None
    """Replaces the environment's system prompt (e.g. a GEPA result)."""
    tool_descriptions: dict[str, str] | None = None
    """Replaces the named tools' descriptions (``--tools-file``, e.g. a GEPA ``tools.json``) of a native tool
    environment, a legacy ``vf.ToolEnv``, or a v1 taskset's MCP tools (replaced in its model requests)."""
    shuffle: bool = False
    """Shuffle the eval split before taking ``num_examples``."""
    seed: int = 0
    """Seed for shuffling (vf-eval's ``shuffle_seed``; recorded as ``shuffle_seed`` when ``shuffle`` is on)."""
    output_dir: str | None = None
    """Run dirs go under ``<output_dir>/evals/``; unset: a local environment's ``outputs/``
    (``environments/<env>/outputs``), else ``./outputs``."""
    provider: str | None = None
    """vf-eval's ``-p`` preset: a base URL and key variable filling unset ``base_url``/``api_key_var``."""
    api_client_type: str | None = None
    """vf-eval's ``--api-client-type``; only ``openai_chat_completions`` (the HTTP client) is accepted."""
    independent_scoring: bool = False
    """Score each rollout on its own (vf-eval's ``-i``); native rubrics always do."""
    resume: str | None = None
    """A run dir to continue, or ``"latest"`` (``-R`` without a value) for the newest incomplete matching run."""
    run_dir: str | None = None
    """Write into this folder instead of a new one under ``output_dir`` (the RL trainer's baseline and
    periodic evals do); a run already there with the same settings is continued, others are refused."""
    split: Literal["eval", "train"] = "eval"
    """Which split to draw examples from: the eval split (falls back to train), or the training split
    (the RL baseline checks the rows it will train on)."""
    pass_threshold: float = DEFAULT_PASS_THRESHOLD
    """A rollout passes (for pass@k) when its reward is at least this; unset, a verifiers environment uses its own
    (0.5 unless it sets one)."""
    preflight: bool = True
    """Send one small request first so an unreachable server fails fast."""
    retry_errors: bool = True
    """On resume, run again the rollouts that errored without a score (error kinds ``model``,
    ``environment``, ``timeout``); rows whose reward function raised are kept (they would repeat)."""

    @field_validator("num_examples")
    @classmethod
    def _num_examples(cls, value: int) -> int:
        if value == 0 or value < -1:
            raise ValueError("must be a positive number or -1 (all)")
        return value

    @field_validator("sampling")
    @classmethod
    def _known_sampling_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        check_sampling(value)
        return value

    @property
    def model_label(self) -> str:
        """The model as recorded in paths and metadata."""
        return self.client_spec().label

    @property
    def output_root(self) -> Path:
        """The folder whose ``evals/`` holds this eval's run dirs (see :func:`evalkit.core.runs.outputs_root`)."""
        from evalkit.core.runs import outputs_root

        return outputs_root(self.env_id, self.env_dir_path, self.output_dir)

    @property
    def shuffle_seed(self) -> int | None:
        """vf-eval's meaning: the seed when shuffling, else None."""
        return self.seed if self.shuffle else None

    def client_spec(self) -> ClientSpec:
        """The model client this eval asks for (built by :func:`evalkit.clients.factory.make_client`)."""
        from evalkit.clients.providers import apply_provider, check_client_type

        check_client_type(self.api_client_type)
        base_url, api_key_var = apply_provider(self.provider, self.base_url, self.api_key_var)
        return super().client_spec(base_url=base_url, api_key_var=api_key_var)

    def system_prompt_sha256(self) -> str | None:
        if self.system_prompt is None:
            return None
        return hashlib.sha256(utf8(self.system_prompt)).hexdigest()


SAMPLING_KEYS = ("max_tokens", "temperature", "top_p")
"""Sampling keys verifiers' configs put next to the other settings instead of in a ``[sampling]`` table."""


def anchor_sampling_keys(data: Any) -> Any:
    """Fold ``[sampling_args]`` and top-level ``max_tokens``/``temperature``/``top_p`` into ``sampling``."""
    if not isinstance(data, dict):
        return data
    data = dict(data)
    if "sampling_args" in data:
        if "sampling" in data:
            raise ValueError("set [sampling] or [sampling_args] (the same table), not both")
        data["sampling"] = data.pop("sampling_args")
    loose = {key: data.pop(key) for key in SAMPLING_KEYS if key in data}
    if loose:
        table = dict(data.get("sampling") or {})
        twice = sorted(key for key in loose if key in table)
        if twice:
            raise ValueError(f"{twice[0]} is set both at this level and in [sampling]; set it once")
        data["sampling"] = {**table, **loose}
    return data


V1_PARTS = ("taskset", "harness", "runtime")
"""Sub-tables of an environment table for a verifiers v1 taskset (``[env.taskset]``, ``[eval.harness]``,
``[eval.runtime]``, ...)."""


def anchor_env_keys(data: Any) -> Any:
    """Accept verifiers' ``env_id``/``env_args`` for an environment table's ``id``/``args``, and the v1
    sub-tables ``taskset``/``harness``/``runtime`` (``[env.taskset] split = "train"``, ``[env.harness] max_turns
    = 8``), which become ``args["taskset"]``/``args["harness"]``/``args["runtime"]`` (what
    ``-a '{"taskset": {...}}'`` gives; see
    :mod:`evalkit.verifiers_compat.v1.config`)."""
    if not isinstance(data, dict):
        return data
    data = dict(data)
    for ours, theirs in (("id", "env_id"), ("args", "env_args")):
        if theirs in data:
            if ours in data:
                raise ValueError(f"set {ours} or {theirs} (the same thing), not both")
            data[ours] = data.pop(theirs)
    parts = {part: data.pop(part) for part in V1_PARTS if part in data}
    if parts:
        args = data.get("args")
        args = dict(args) if isinstance(args, dict) else {}
        for part, table in parts.items():
            if not isinstance(table, dict):
                raise ValueError(f"{part} must be a table of the v1 taskset's {part} settings, got {table!r}")
            if part in args:
                raise ValueError(f"{part} is set both as a table and in args; set it once")
            args[part] = table
        data["args"] = args
    return data


class EnvTable(BaseModel):
    """An environment table of any config (eval's ``[[eval]]``, GEPA's ``[env]``, RL's ``[[env]]``): its id and
    its ``load_environment`` args, under verifiers' names too (:func:`anchor_env_keys`). One class, so the three
    configs accept the same spellings and refuse the same mistakes."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    @model_validator(mode="before")
    @classmethod
    def _anchor_keys(cls, data: Any) -> Any:
        return anchor_env_keys(data)

    id: str = Field(min_length=1)
    """Environment id (``arithmetic``, ``primeintellect/reverse-text``, ``./environments/my_env``)."""
    args: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments for the environment's ``load_environment(**args)``."""

    @field_validator("args")
    @classmethod
    def _secrets_in_args(cls, value: dict[str, Any]) -> dict[str, Any]:
        register_named_secrets(value)  # a harness's env table: redacted everywhere from here on
        return value


class _EvalEntryBase(EnvTable):
    @model_validator(mode="before")
    @classmethod
    def _anchor_keys(cls, data: Any) -> Any:
        return anchor_sampling_keys(anchor_env_keys(data))

    system_prompt_file: str | None = None
    """Read this entry's system prompt from a file (relative to the config)."""
    sampling: dict[str, Any] = Field(default_factory=dict)
    """Merged over the file's ``[sampling]``."""


ENTRY_KEYS = frozenset({"num_examples", "rollouts_per_example", "max_concurrent", "model", "endpoint_id",
                        "system_prompt", "state_columns"})
"""What one ``[[eval]]`` may set for itself besides its id, args, sampling and system prompt file."""

EvalEntry = all_optional("EvalEntry", EvalConfig, only=ENTRY_KEYS, base=_EvalEntryBase)
"""One ``[[eval]]`` table (``env_id``/``env_args`` and loose sampling keys accepted, see the module docstring)."""


class _EvalFileBase(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    @model_validator(mode="before")
    @classmethod
    def _anchor_keys(cls, data: Any) -> Any:
        return anchor_sampling_keys(data)

    eval: list[EvalEntry] = Field(min_length=1)  # type: ignore[valid-type]
    """The evals to run, in order."""
    sampling: dict[str, Any] = Field(default_factory=dict)
    """Default sampling args for every entry."""
    env_args: dict[str, Any] = Field(default_factory=dict)
    """Default env args for every entry (an entry's own args win)."""
    system_prompt_file: str | None = None
    """Read every entry's system prompt from a file (relative to the config)."""
    shuffle_seed: int | None = None
    """vf-eval's name for ``seed``."""
    header: list[str] | None = None
    """vf-eval's ``header = ["Name: Value"]`` list, beside the ``headers`` table."""
    save_results: bool | None = None
    """Accepted for vf-eval configs; results are always saved, so ``false`` is refused."""
    env_file: str | list[str] | None = None
    """Secrets file(s), ``KEY=VALUE`` lines, relative to this file (hosted training's ``env_file``)."""


EvalFile = all_optional(
    "EvalFile", EvalConfig, exclude=frozenset({"env_id", "resume", "run_dir", "split", "preflight"}), base=_EvalFileBase
)
"""A whole eval TOML: every :class:`EvalConfig` key as a default at the top level, entries in ``[[eval]]``."""


def load_eval_file(path: str | Path, overrides: dict[str, Any] | None = None) -> list[EvalConfig]:
    """Read an eval TOML into one EvalConfig per ``[[eval]]``; ``overrides`` (CLI flags given) win."""
    file = Path(path)
    parsed = validate(EvalFile, load_toml(file), file)
    base = file.resolve().parent
    top = parsed.model_dump(exclude={"eval", "sampling", "system_prompt_file", "env_args"}, exclude_none=True)
    _anchor_top_keys(top, file)
    for key in ("output_dir", "endpoints_path", "env_dir_path"):
        if key in top:
            top[key] = _resolve(top[key], base)
    if "env_file" in top:
        from evalkit.core.secrets_file import resolve_env_files

        top["env_file"] = resolve_env_files(top["env_file"], base)
    if "model" in top:
        top["model"] = _resolve_model(top["model"], base)
    top_prompt = _read_prompt(parsed.system_prompt_file, base, file) if parsed.system_prompt_file else None
    configs = []
    for entry in parsed.eval:
        data: dict[str, Any] = dict(top)
        if top_prompt is not None:
            data["system_prompt"] = top_prompt
        own = entry.model_dump(exclude={"id", "args", "sampling", "system_prompt_file"}, exclude_none=True)
        if "model" in own:
            own["model"] = _resolve_model(own["model"], base)
        data.update(own)
        if entry.system_prompt_file:
            data["system_prompt"] = _read_prompt(entry.system_prompt_file, base, file)
        data["env_id"] = _resolve_env(entry.id, base)
        data["env_args"] = {**parsed.env_args, **entry.args}
        data["sampling"] = {**parsed.sampling, **entry.sampling}
        for key, value in (overrides or {}).items():
            if key == "sampling":
                data["sampling"] = {**data["sampling"], **value}
            elif key == "env_args":
                data["env_args"] = {**data["env_args"], **value}
            else:
                data[key] = value
        if "model" in (overrides or {}) and "endpoint_id" not in (overrides or {}):
            data.pop("endpoint_id", None)  # -m on the command line replaces the file's endpoint choice
        configs.append(validate(EvalConfig, data, f"{file} [[eval]] id={entry.id}"))
    return configs


def _anchor_top_keys(top: dict[str, Any], file: Path) -> None:
    """vf-eval's spellings of top-level keys, folded into ours in place."""
    from evalkit.clients.providers import parse_headers

    if "shuffle_seed" in top:
        if "seed" in top:
            raise ConfigError(f"{file}: set seed or shuffle_seed (the same thing), not both")
        top["seed"] = top.pop("shuffle_seed")
    if "header" in top:
        top["headers"] = {**top.get("headers", {}), **parse_headers(top.pop("header"))}
    if top.pop("save_results", True) is False:
        raise ConfigError(f"{file}: save_results = false is not supported: primekit always saves results; drop the key")


def _resolve(value: str, base: Path) -> str:
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else (base / path))


def _resolve_model(model: str, base: Path) -> str:
    """Model names stay as they are; ``./`` or ``../`` folders resolve against the config's folder."""
    return _resolve(model, base) if model.startswith((".", "~")) else model


def _resolve_env(env_id: str, base: Path) -> str:
    return _resolve(env_id, base) if env_id.startswith((".", "~")) else env_id


def _read_prompt(value: str, base: Path, file: Path) -> str:
    from evalkit.core.fileio import read_user_text

    try:
        return read_user_text(_resolve(value, base), "system_prompt_file")
    except UserError as exc:
        raise ConfigError(f"{file}: {exc}") from None
