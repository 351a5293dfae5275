"""What a GEPA job is: the TOML file's shape and the resolved job config the runner takes.

Two layers on purpose: :class:`GepaToml` is ``configs/gepa/*.toml``'s shape, derived from the job config (every
key optional; unknown keys are rejected, so a typo never silently falls back to a default), and
:class:`GepaJobConfig` is the one
object :func:`gepa_cli.runner.run_gepa` takes, built from the TOML and/or CLI flags with
flags winning. Importable without torch, the library, or the model clients.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, field_validator, model_validator

from evalkit.clients.routing import is_embedded, route
from evalkit.clients.spec import ClientSpec
from evalkit.core.defaults import DEFAULT_MODEL
from evalkit.core.errors import ConfigError, UserError
from evalkit.core.tomlio import load_toml, validate
from evalkit.eval.config import EnvTable
from evalkit.vocabulary import ConcurrencyFields, EnvFields, ModelFields, RolloutBounds, SecretsFields, all_optional
from gepa_cli.search_options import GepaSearchFields
from gepa_cli.tracking import GepaTrackingFields


class EnvSpec(EnvTable):
    """One environment whose examples train and validate the shared system prompt.

    verifiers' GEPA configs write ``env_id``/``env_args``; those names are accepted for ``id``/``args``.
    """

    extra_env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Settings applied to the loaded environment, as verifiers' ``extra_env_kwargs``
    (:mod:`evalkit.loading.kwargs`)."""


class GepaJobConfig(ModelFields, RolloutBounds, ConcurrencyFields, EnvFields, SecretsFields, GepaSearchFields,
                    GepaTrackingFields):
    """Everything one ``prime gepa run`` needs, already resolved. The model, rollout-bound, concurrency and
    environment fields are the shared vocabulary (:mod:`evalkit.vocabulary`), the search and stopping knobs
    :class:`GepaSearchFields`, the tracking tables :class:`GepaTrackingFields`; the teacher inherits the task
    model's ``-b``/``-k``/retries/timeout/device (see :meth:`teacher_spec`)."""

    envs: list[EnvSpec] = Field(min_length=1)
    """Environments sharing one system prompt; examples are drawn from each equally."""
    reflection_model: str | None = None
    """Teacher model that rewrites the prompt; unset: the task model."""
    max_calls: int = Field(default=500, ge=1)
    """Rollout budget: every task-model rollout counts, the seed's validation pass included (reflection calls
    are counted separately)."""
    num_train: int = Field(default=100, ge=1)
    """Training examples the reflection minibatches are drawn from."""
    num_val: int = Field(default=50, ge=1)
    """Validation examples every accepted candidate is scored on (the Pareto frontier's axis)."""
    minibatch_size: int = Field(default=3, ge=1)
    """Training examples shown to the reflection model per proposal."""
    perfect_score: float | None = None
    """verifiers' meaning: when set, minibatches on which the parent already scores this everywhere are not
    reflected on (the library's ``skip_perfect_score``); the run goes on."""
    stop_at_score: float | None = None
    """End the run once a candidate's mean validation score reaches this (None: run until the budget is spent)."""
    sampling: dict[str, Any] = Field(default_factory=dict)
    """Task-model sampling args (merged over each environment's own)."""
    seed: int = 0
    """Seed for data sampling and the library's candidate/minibatch choices."""
    run_dir: str | None = None
    """Explicit run directory; default ``<output_root>/gepa/<env>--<model>/<run-id>/``, where the output root is
    a local environment's ``outputs/`` (``environments/<env>/outputs``), else ``./outputs``."""
    output_root: str | None = None
    """Root of run dirs; default (:func:`evalkit.core.runs.outputs_root`): one local environment's ``outputs/``,
    else ``./outputs``."""
    reflection_attempts: int = Field(default=3, ge=1)
    """Reflection requests per proposal before the run fails (empty reply, no fenced block, error)."""
    reflection_sampling: dict[str, Any] | None = None
    """Teacher sampling args; default ``max_tokens`` 1024, or 256 for an embedded teacher (which rambles)."""
    initial_prompt: str | None = None
    """The seed candidate's system prompt (verifiers 0.4's ``gepa`` key); None: the first environment's own."""

    @model_validator(mode="after")
    def _resolved(self) -> GepaJobConfig:
        """The task model is named in paths and metadata, so it is never left unset; the top-level
        ``extra_env_kwargs`` apply to every environment (an environment's own win)."""
        if self.model is None:
            self.model = DEFAULT_MODEL
        if self.extra_env_kwargs:
            for spec in self.envs:
                spec.extra_env_kwargs = {**self.extra_env_kwargs, **spec.extra_env_kwargs}
        return self

    @property
    def teacher(self) -> str:
        return self.reflection_model or self.model

    @property
    def teacher_sampling(self) -> dict[str, Any]:
        return self.teacher_sampling_for(is_embedded(self.teacher_spec()))

    def teacher_sampling_for(self, embedded: bool) -> dict[str, Any]:
        """The teacher's sampling args, given whether it is embedded (its route, which reads files, found once
        by the caller): an embedded model's default reply is shorter."""
        return {"max_tokens": 256 if embedded else 1024, **(self.reflection_sampling or {})}

    def task_spec(self) -> ClientSpec:
        """The task model's client spec (rollouts)."""
        return self.client_spec()

    def teacher_spec(self) -> ClientSpec:
        """The reflection model's spec: the task's, with the teacher's name.

        A teacher that names its own target (``litellm/...``, an endpoint id) does not inherit
        ``-b``/``-k``: they name the task model's server and key, not the teacher's.
        """
        spec = self.task_spec()
        if self.teacher == self.model:
            return spec
        own = replace(spec, model=self.teacher, base_url=None, api_key_var=None, endpoint_id=None)
        try:
            if route(own).backend in ("litellm", "endpoint"):
                return own
        except UserError:  # not routable on its own (e.g. not in the -e file): it goes to -b
            pass
        return replace(spec, model=self.teacher, endpoint_id=None)

    @property
    def runs_root(self) -> Path:
        """Where run dirs go (under ``gepa/``): ``output_root``, else a single local environment's outputs/, else
        ./outputs."""
        from evalkit.core.runs import outputs_root

        single = self.envs[0].id if len(self.envs) == 1 else None
        return outputs_root(single, self.env_dir_path, self.output_root)

    @property
    def env_label(self) -> str:
        from evalkit.core.runs import env_slug

        return "+".join(env_slug(spec.id) for spec in self.envs)


SECTION_KEYS = frozenset(
    {
        "max_calls",
        "num_train",
        "num_val",
        "minibatch_size",
        "seed",
        "perfect_score",
        "stop_at_score",
        "state_columns",
        *RolloutBounds.model_fields,
        *ConcurrencyFields.model_fields,
        *GepaSearchFields.model_fields,
    }
)
"""The ``[gepa]`` table's keys: budget, data sizes, search settings and rollout bounds."""
TOP_KEYS = frozenset({*ModelFields.model_fields, "reflection_model", "env_dir_path", "run_dir", "extra_env_kwargs"})
"""The file's top-level keys besides its tables: the model fields, the teacher and where things are."""
PATH_KEYS = ("endpoints_path", "env_dir_path", "run_dir")
"""Top-level keys naming paths, resolved against the file's folder."""

GepaSection = all_optional("GepaSection", GepaJobConfig, only=SECTION_KEYS)


class _GepaTomlBase(GepaTrackingFields):
    """The file's tables: ``[[env]]``, ``[gepa]``, sampling, and (inherited) ``[wandb]``/``[mlflow]``."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    api_base_url: str | None = None
    """verifiers' name for ``base_url``."""
    env: list[EnvSpec] = Field(min_length=1)
    """``[[env]]`` tables (a single ``[env]`` table is accepted too)."""
    gepa: GepaSection = Field(default_factory=GepaSection)  # type: ignore[valid-type]
    """Budget, data sizes and search settings."""
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


GepaToml = all_optional("GepaToml", GepaJobConfig, only=TOP_KEYS, base=_GepaTomlBase)
"""A ``configs/gepa/*.toml`` file: the job's keys, each optional, with ``[[env]]`` and ``[gepa]`` tables."""


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
    for key in sorted(TOP_KEYS):
        value = getattr(parsed, key)
        if value is not None and key in PATH_KEYS:
            path = Path(value).expanduser()
            value = str(path if path.is_absolute() else base_dir / path)
        if value is not None:
            fields[key] = value
    for key, value in parsed.gepa.model_dump(exclude_unset=True).items():
        if value is not None:
            fields[key] = value
    for table in ("wandb", "mlflow"):
        if getattr(parsed, table) is not None:
            fields[table] = getattr(parsed, table).model_dump(exclude_unset=True)
    if parsed.sampling:
        fields["sampling"] = dict(parsed.sampling)
    if parsed.reflection_sampling:
        fields["reflection_sampling"] = dict(parsed.reflection_sampling)
    if parsed.env_file:
        from evalkit.core.secrets_file import resolve_env_files

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
