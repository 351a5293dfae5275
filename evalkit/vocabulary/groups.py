"""The field groups: which model and endpoint, how each rollout is bounded, how many run at once, where
environments come from. A job config inherits the groups it uses; see the package docstring."""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from evalkit.clients.spec import ClientSpec
from evalkit.core.aio import Slots
from evalkit.core.defaults import (
    DEFAULT_MAX_CONCURRENT,
    DEFAULT_MAX_MESSAGE_CHARS,
    DEFAULT_MAX_RETRIES,
    DEFAULT_ROLLOUT_TIMEOUT_S,
    DEFAULT_SCORE_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    RolloutLimits,
)
from evalkit.core.redact import register_secret_headers


def positive_seconds(cls: type[BaseModel], value: float, info: ValidationInfo) -> float:
    """A duration must be a finite positive number; the message names the field's default."""
    if not math.isfinite(value) or value <= 0:
        raise ValueError(
            f"must be a positive number of seconds (default {cls.model_fields[str(info.field_name)].default:g})"
        )
    return value


class FieldGroup(BaseModel):
    """Strict (unknown keys rejected) and documented (each field's docstring is its description: ``--help``
    and the derived file schemas read it)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class ModelFields(FieldGroup):
    """Which model answers and how requests reach it (eval's flags ``-m -b -k -e --header --max-retries --timeout
    --device``; GEPA's task model). Which backend serves ``model``: :mod:`evalkit.clients.routing`."""

    model: str | None = None
    """Model: a server's model name, an ``endpoint_id`` in endpoints.toml, ``local/...``, ``hf/<org>/<name>``, a
    model folder or ``litellm/<provider>/<model>``; unset: the embedded default."""
    endpoint_id: str | None = None
    """An endpoint that must exist in the endpoints file; wins over ``model`` for routing."""
    base_url: str | None = None
    """OpenAI-compatible base URL (``.../v1``); default ``$OPENAI_BASE_URL``."""
    api_key_var: str | None = None
    """NAME of the env var holding the API key (never the key); default ``OPENAI_API_KEY``."""
    endpoints_path: str | None = None
    """endpoints.toml path; default ``./configs/endpoints.toml`` when present."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Extra HTTP headers on every model request; every value (but ``Accept``, ``Content-Type``, ``User-Agent`` and a
    few like them) is a secret, redacted everywhere (docs/reliability.md)."""
    max_retries: int = Field(DEFAULT_MAX_RETRIES, ge=0)
    """Retries per model request after the first attempt (429/5xx/timeouts/dropped connections/bad bodies)."""
    timeout: float = DEFAULT_TIMEOUT_S
    """Seconds per model request attempt, the whole reply included; must be positive."""
    device: str | None = None
    """Where an in-process model (the embedded engine, ``hf/...``, a model folder) runs: ``auto`` (CUDA when
    present, else CPU), ``cpu``, ``cuda``, ``cuda:N``; ignored for models behind a server."""

    @field_validator("timeout")
    @classmethod
    def _positive_timeout(cls, value: float, info: ValidationInfo) -> float:
        return positive_seconds(cls, value, info)

    @field_validator("headers")
    @classmethod
    def _sendable_headers(cls, value: dict[str, str]) -> dict[str, str]:
        from evalkit.clients.providers import header_problem

        for name, text in value.items():
            problem = header_problem(name, str(text))
            if problem:
                raise ValueError(f"header {name[:40]!r}: {problem}")
        register_secret_headers(value)  # configured header values are secrets from here on (dry runs included)
        return value

    @field_validator("device")
    @classmethod
    def _known_device(cls, value: str | None) -> str | None:
        from evalkit.model.devices import check_device

        return None if value is None else check_device(value)

    def client_spec(self, **changes: Any) -> ClientSpec:
        """The client these fields ask for (built by :func:`evalkit.clients.factory.make_client`); ``changes``
        replace spec fields (a config that resolves a provider preset passes its base URL and key variable)."""
        fields: dict[str, Any] = dict(
            model=self.model, base_url=self.base_url, api_key_var=self.api_key_var, endpoints_path=self.endpoints_path,
            endpoint_id=self.endpoint_id, max_retries=self.max_retries, timeout=self.timeout,
            headers=dict(self.headers), device=self.device)
        return ClientSpec(**{**fields, **changes})


class RolloutBounds(FieldGroup):
    """What bounds every rollout, the same flag and key in eval, GEPA and RL."""

    rollout_timeout: float = DEFAULT_ROLLOUT_TIMEOUT_S
    """Seconds, wall clock, one rollout's conversation (model calls, ``env_response``, tools) may take; past it
    the rollout ends as an error of kind ``timeout`` (vf-eval's ``--timeout`` bounds the same)."""
    score_timeout: float = DEFAULT_SCORE_TIMEOUT_S
    """Seconds the scoring of one rollout (all its reward functions) may take; past it the rollout records an
    error of kind ``timeout``."""
    max_message_chars: int = Field(DEFAULT_MAX_MESSAGE_CHARS, ge=1)
    """Characters kept of one message an environment adds (a tool result, an ``env_response``) and of each stored
    message; the rest is cut with a marker saying how much."""

    @field_validator("rollout_timeout", "score_timeout")
    @classmethod
    def _positive_timeouts(cls, value: float, info: ValidationInfo) -> float:
        return positive_seconds(cls, value, info)

    def limits(self) -> RolloutLimits:
        """The bundle :meth:`evalkit.envs.base.Environment.rollout` takes."""
        return RolloutLimits(rollout_timeout=self.rollout_timeout, score_timeout=self.score_timeout,
                             max_message_chars=self.max_message_chars)


class ConcurrencyFields(FieldGroup):
    """How many rollouts run at once."""

    max_concurrent: int = Field(DEFAULT_MAX_CONCURRENT, ge=1)
    """Rollouts in flight at once, one bound shared by all of a run's environments (vf-eval's ``-c``)."""

    def slots(self) -> Slots:
        """The bound itself, one per run (shared by its environments): eval's runner, GEPA's adapter and RL's
        rollout collection each take theirs from here."""
        return Slots(self.max_concurrent)


class EnvFields(FieldGroup):
    """Where environments come from and what they get besides their ``load_environment`` args."""

    env_dir_path: str = "environments"
    """Folder of local environments (vf-eval's ``--env-dir-path``): searched for the id, and where its outputs go."""
    extra_env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Settings applied to the loaded environment (vf-eval's ``-x``): ``set_<key>(value)`` or an existing attribute."""
    state_columns: list[str] = Field(default_factory=list)
    """Keys of the environment's rollout state to keep beside each rollout (results.jsonl columns; GEPA shows them
    to the reflection model)."""


class SecretsFields(FieldGroup):
    """Secrets the environment needs (judge or tool keys), by file, never by value."""

    env_file: list[str] = Field(default_factory=list)
    """``KEY=VALUE`` secrets files (judge or tool keys) loaded into the environment for the run (relative to the
    config file); their values are never written to outputs, logs or resolved configs (their paths are)."""

    @field_validator("env_file", mode="before")
    @classmethod
    def _one_file(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value
