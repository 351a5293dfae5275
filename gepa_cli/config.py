"""What a GEPA job is: the TOML file's shape and the resolved job config the runner takes.

Two layers on purpose: :class:`GepaToml` mirrors ``configs/gepa/*.toml`` exactly (unknown keys are
rejected, so a typo never silently falls back to a default), and :class:`GepaJobConfig` is the one
object :func:`gepa_cli.runner.run_gepa` takes, built from the TOML and/or CLI flags with
flags winning. Importable without torch, the library, or the model clients.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from evalkit.clients.routing import is_embedded, route
from evalkit.clients.spec import ClientSpec
from evalkit.defaults import DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_RETRIES, DEFAULT_MODEL, DEFAULT_TIMEOUT_S
from evalkit.errors import ConfigError, UserError
from evalkit.eval.config import EnvTable
from evalkit.defaults import DEFAULT_MAX_MESSAGE_CHARS, DEFAULT_ROLLOUT_TIMEOUT_S, DEFAULT_SCORE_TIMEOUT_S, RolloutLimits
from evalkit.tomlio import load_toml, validate


class EnvSpec(EnvTable):
    """One environment whose examples train and validate the shared system prompt.

    verifiers' GEPA configs write ``env_id``/``env_args``; those names are accepted for ``id``/``args``.
    """

    extra_env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Settings applied to the loaded environment, as verifiers' ``extra_env_kwargs`` (:mod:`evalkit.env_kwargs`)."""


class GepaSection(BaseModel):
    """The ``[gepa]`` table: budget, data sizes and search settings."""

    model_config = ConfigDict(extra="forbid")

    max_calls: int | None = Field(default=None, ge=1)
    """Rollout budget: every task-model rollout counts, the seed's validation pass included."""
    num_train: int | None = Field(default=None, ge=1)
    """Training examples the reflection minibatches are drawn from."""
    num_val: int | None = Field(default=None, ge=1)
    """Validation examples every accepted candidate is scored on (the Pareto frontier's axis)."""
    minibatch_size: int | None = Field(default=None, ge=1)
    """Training examples shown to the reflection model per proposal."""
    max_concurrent: int | None = Field(default=None, ge=1)
    """Rollouts in flight at once, shared by all the run's environments."""
    seed: int | None = None
    """Seed for data sampling and the library's candidate/minibatch choices."""
    perfect_score: float | None = None
    """Skip reflecting on a minibatch where the parent scores at least this on every example (verifiers' meaning)."""
    stop_at_score: float | None = None
    """Stop as soon as a candidate's mean validation score reaches this."""
    state_columns: list[str] | None = None
    """Environment state keys shown to the reflection model next to each rollout."""
    rollout_timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Seconds, wall clock, one rollout's conversation may take (default 3600); past it the rollout errors (kind timeout)."""
    score_timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Seconds the scoring of one rollout may take (default 120)."""
    max_message_chars: int | None = Field(default=None, ge=1)
    """Characters kept of one tool result or environment message (default 100000); the rest is cut with a marker."""


class GepaToml(BaseModel):
    """A ``configs/gepa/*.toml`` file."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    """Task model (rollouts)."""
    reflection_model: str | None = None
    """Teacher model that rewrites the prompt (default: the task model)."""
    endpoints_path: str | None = None
    """An ``endpoints.toml`` resolving model ids to URLs; relative to this file."""
    base_url: str | None = None
    """An OpenAI-compatible base URL for the models."""
    api_base_url: str | None = None
    """verifiers' name for ``base_url``."""
    api_key_var: str | None = None
    """Name of the environment variable holding the API key (never the key itself)."""
    env_dir_path: str | None = None
    """Folder of local environments (default ``./environments``); relative to this file."""
    run_dir: str | None = None
    """The run directory (default: see :func:`evalkit.runs.outputs_root`); relative to this file."""
    max_retries: int | None = Field(default=None, ge=0)
    """Retries per model request (429/5xx/timeouts/dropped connections); default 3."""
    timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Seconds per model request attempt, the whole reply included; default 600."""
    device: str | None = None
    """Where in-process models run (auto, cpu, cuda, cuda:N); default auto."""
    env: list[EnvSpec] = Field(min_length=1)
    """``[[env]]`` tables (a single ``[env]`` table is accepted too)."""
    gepa: GepaSection = Field(default_factory=GepaSection)
    sampling: dict[str, Any] = Field(default_factory=dict)
    """Task-model sampling args passed through (``max_tokens``, ``temperature``, ...)."""
    reflection_sampling: dict[str, Any] = Field(default_factory=dict)
    """Teacher sampling args (default ``max_tokens`` 1024; 256 for an embedded teacher)."""
    env_file: str | list[str] | None = None
    """Secrets file(s), ``KEY=VALUE`` lines (judge or tool keys), relative to this file; never written anywhere."""

    @field_validator("env", mode="before")
    @classmethod
    def _single_env_table(cls, value: Any) -> Any:
        return [value] if isinstance(value, dict) else value


class GepaJobConfig(BaseModel):
    """Everything one ``prime gepa run`` needs, already resolved."""

    model_config = ConfigDict(extra="forbid")

    envs: list[EnvSpec] = Field(min_length=1)
    """Environments sharing one system prompt; examples are drawn from each equally."""
    model: str = DEFAULT_MODEL
    """Task model (rollouts)."""
    reflection_model: str | None = None
    """Teacher model; ``None`` means the task model."""
    endpoints_path: str | None = None
    base_url: str | None = None
    """OpenAI-compatible base URL: for the task model, and the teacher unless it names an endpoint or ``litellm/...``."""
    api_key_var: str | None = None
    """Env var NAME holding the key: for the task model, and the teacher unless it names an endpoint or ``litellm/...``."""
    max_retries: int = Field(default=DEFAULT_MAX_RETRIES, ge=0)
    """Retries per model request, task and teacher alike."""
    timeout: float = Field(default=DEFAULT_TIMEOUT_S, gt=0, allow_inf_nan=False)
    """Seconds per model request attempt, task and teacher alike."""
    device: str | None = None
    """Where in-process models (embedded, ``hf/...``, a folder) run, task and teacher: auto, cpu, cuda, cuda:N."""
    max_calls: int = Field(default=500, ge=1)
    """Rollout budget (seed validation included; reflection calls are counted separately)."""
    num_train: int = Field(default=100, ge=1)
    num_val: int = Field(default=50, ge=1)
    minibatch_size: int = Field(default=3, ge=1)
    perfect_score: float | None = None
    """verifiers' meaning: when set, minibatches on which the parent already scores this everywhere are not
    reflected on (the library's ``skip_perfect_score``); the run goes on."""
    stop_at_score: float | None = None
    """End the run once a candidate's mean validation score reaches this (None: run until the budget is spent)."""
    state_columns: list[str] = Field(default_factory=list)
    max_concurrent: int = Field(default=DEFAULT_MAX_CONCURRENT, ge=1)
    """Task-model rollouts in flight at once, one bound shared by all the environments."""
    sampling: dict[str, Any] = Field(default_factory=dict)
    """Task-model sampling args (merged over each environment's own)."""
    seed: int = 0
    run_dir: str | None = None
    """Explicit run directory; default ``<output_root>/gepa/<env>--<model>/<run-id>/``."""
    output_root: str | None = None
    """Root of run dirs; default (:func:`evalkit.runs.outputs_root`): one local environment's ``outputs/``, else ``./outputs``."""
    env_dir_path: str = "environments"
    """Folder of local environments (verifiers' ``--env-dir-path``)."""
    reflection_attempts: int = Field(default=3, ge=1)
    """Reflection requests per proposal before the run fails (empty reply, no fenced block, error)."""
    reflection_sampling: dict[str, Any] | None = None
    """Teacher sampling args; default ``max_tokens`` 1024, or 256 for an embedded teacher (which rambles)."""
    env_file: list[str] = Field(default_factory=list)
    """``KEY=VALUE`` secrets files the command loads into the environment for the run (names recorded, values never)."""
    rollout_timeout: float = Field(default=DEFAULT_ROLLOUT_TIMEOUT_S, gt=0, allow_inf_nan=False)
    """Seconds, wall clock, one task-model rollout's conversation may take; past it the rollout errors
    (kind ``timeout``) and scores 0 for GEPA."""
    score_timeout: float = Field(default=DEFAULT_SCORE_TIMEOUT_S, gt=0, allow_inf_nan=False)
    """Seconds the scoring of one rollout may take."""
    max_message_chars: int = Field(default=DEFAULT_MAX_MESSAGE_CHARS, ge=1)
    """Characters kept of one tool result or environment message; the rest is cut with a marker."""
    initial_prompt: str | None = None
    """The seed candidate's system prompt (verifiers' ``initial_prompt``); default: the first environment's own."""

    def limits(self) -> RolloutLimits:
        """The bounds every task-model rollout runs under."""
        return RolloutLimits(rollout_timeout=self.rollout_timeout, score_timeout=self.score_timeout,
                             max_message_chars=self.max_message_chars)

    @property
    def teacher(self) -> str:
        return self.reflection_model or self.model

    @property
    def teacher_sampling(self) -> dict[str, Any]:
        default = 256 if is_embedded(self.teacher_spec()) else 1024
        return {"max_tokens": default, **(self.reflection_sampling or {})}

    @field_validator("device")
    @classmethod
    def _known_device(cls, value: str | None) -> str | None:
        from evalkit.model.devices import check_device

        return None if value is None else check_device(value)

    def task_spec(self) -> ClientSpec:
        """The task model's client spec (rollouts)."""
        return ClientSpec(model=self.model, base_url=self.base_url, api_key_var=self.api_key_var,
                          endpoints_path=self.endpoints_path, max_retries=self.max_retries, timeout=self.timeout,
                          device=self.device)

    def teacher_spec(self) -> ClientSpec:
        """The reflection model's spec: the task's, with the teacher's name.

        A teacher that names its own target (``litellm/...``, an endpoint id) does not inherit
        ``-b``/``-k``: they name the task model's server and key, not the teacher's.
        """
        spec = self.task_spec()
        if self.teacher == self.model:
            return spec
        own = replace(spec, model=self.teacher, base_url=None, api_key_var=None)
        try:
            if route(own).backend in ("litellm", "endpoint"):
                return own
        except UserError:  # not routable on its own (e.g. not in the -e file): it goes to -b
            pass
        return replace(spec, model=self.teacher)

    @property
    def runs_root(self) -> Path:
        """Where run dirs go (under ``gepa/``): ``output_root``, else a single local environment's outputs/, else ./outputs."""
        from evalkit.runs import outputs_root

        single = self.envs[0].id if len(self.envs) == 1 else None
        return outputs_root(single, self.env_dir_path, self.output_root)

    @property
    def env_label(self) -> str:
        from evalkit.runs import env_slug

        return "+".join(env_slug(spec.id) for spec in self.envs)


def load_gepa_toml(path: str | Path) -> tuple[GepaToml, Path]:
    """Read and validate a GEPA TOML; returns it and the folder relative paths resolve against."""
    file = Path(path)
    data = load_toml(file)
    parsed = validate(GepaToml, data, file)
    return parsed, file.resolve().parent


def toml_to_job_fields(parsed: GepaToml, base_dir: Path) -> dict[str, Any]:
    """The job fields a TOML sets (only those it sets, so CLI flags and defaults fill the rest)."""
    fields: dict[str, Any] = {"envs": [spec.model_dump() for spec in parsed.env]}
    if parsed.api_base_url is not None:
        if parsed.base_url is not None:
            raise ConfigError("set base_url or api_base_url (the same thing), not both")
        fields["base_url"] = parsed.api_base_url
    for key in ("model", "reflection_model", "base_url", "api_key_var", "max_retries", "timeout", "device"):
        value = getattr(parsed, key)
        if value is not None:
            fields[key] = value
    for key in ("endpoints_path", "env_dir_path", "run_dir"):
        value = getattr(parsed, key)
        if value is not None:
            path = Path(value).expanduser()
            fields[key] = str(path if path.is_absolute() else base_dir / path)
    for key, value in parsed.gepa.model_dump().items():
        if value is not None:
            fields[key] = value
    if parsed.sampling:
        fields["sampling"] = dict(parsed.sampling)
    if parsed.reflection_sampling:
        fields["reflection_sampling"] = dict(parsed.reflection_sampling)
    if parsed.env_file:
        from evalkit.secrets_file import resolve_env_files

        fields["env_file"] = resolve_env_files(parsed.env_file, base_dir)
    return fields


def build_job_config(fields: dict[str, Any], source: str) -> GepaJobConfig:
    """Validate merged fields into the job config; problems become one ``error:`` line.

    Whether the budget buys anything is checked later, once the data sizes are known
    (:class:`gepa_cli.budget.BudgetPlan`), still before any model is called.
    """
    if not fields.get("envs"):
        raise ConfigError(f"{source}: no environment given")
    return validate(GepaJobConfig, fields, source)
