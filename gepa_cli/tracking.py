"""Experiment tracking for GEPA runs through gepa's own integration (``use_wandb`` / ``use_mlflow``).

The ``[wandb]`` and ``[mlflow]`` tables of a GEPA TOML (and ``--wandb-project`` / ``--mlflow-experiment``)
switch them on. Both libraries are optional extras (``pip install 'primekit[wandb]'`` /
``'primekit[mlflow]'``); a run that asks for one that is not installed is refused before anything is
written. No key or secret value is ever passed or logged: wandb and mlflow read their credentials from
their own environment variables (``WANDB_API_KEY``, ``MLFLOW_TRACKING_USERNAME``/``_PASSWORD``), a
tracking URI with credentials in it is refused (it would land in ``metadata.json``), and the run
configuration sent to the tracker names models and settings, never a base URL or an env var's value.
"""

from __future__ import annotations

import importlib.util
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from evalkit.core.errors import UserError


class WandbSection(BaseModel):
    """``[wandb]``: log the run to Weights & Biases (key from ``WANDB_API_KEY`` or ``wandb login``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    project: str | None = None
    """W&B project (default: wandb's own default)."""
    entity: str | None = None
    """W&B team or user."""
    name: str | None = None
    """Run name (default: the run dir's name)."""
    group: str | None = None
    """Run group."""
    tags: list[str] = Field(default_factory=list)
    """Run tags."""
    mode: Literal["online", "offline", "disabled"] | None = None
    """wandb's mode; offline writes locally for a later ``wandb sync``."""


class MlflowSection(BaseModel):
    """``[mlflow]``: log the run to MLflow (credentials from MLflow's own environment variables)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    tracking_uri: str | None = None
    """Tracking server or store (default: ``$MLFLOW_TRACKING_URI``, else mlflow's ``./mlruns``)."""
    experiment_name: str | None = None
    """Experiment the run is logged under."""

    @field_validator("tracking_uri")
    @classmethod
    def _no_credentials(cls, value: str | None) -> str | None:
        if value is not None and (urlsplit(value).username or urlsplit(value).password):
            raise ValueError("the URI holds credentials; set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD "
                             "in the environment (or an --env-file) and give the URI without them")
        return value


class GepaTrackingFields(BaseModel):
    """The tracking tables, composed into the GEPA TOML and the job config."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    wandb: WandbSection | None = None
    """Weights & Biases tracking (off when absent)."""
    mlflow: MlflowSection | None = None
    """MLflow tracking (off when absent)."""


class TrackingShortcuts(BaseModel):
    """Command-line shortcuts for the one key of each tracking table a run most often sets."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    wandb_project: str | None = None
    """Log the run to this W&B project (sets [wandb] project; needs primekit[wandb]; key from WANDB_API_KEY)."""
    mlflow_experiment: str | None = None
    """Log the run to this MLflow experiment (sets [mlflow] experiment_name; needs primekit[mlflow])."""

    def tables(self) -> dict[str, Any]:
        """The ``[wandb]`` / ``[mlflow]`` keys these set."""
        pairs = (("wandb", "project", self.wandb_project), ("mlflow", "experiment_name", self.mlflow_experiment))
        return {table: {key: value} for table, key, value in pairs if value is not None}


def check_installed(config: GepaTrackingFields) -> None:
    """UserError naming the extra to install when a tracker the config asks for is missing."""
    for name, wanted in (("wandb", config.wandb), ("mlflow", config.mlflow)):
        if wanted is not None and importlib.util.find_spec(name) is None:
            raise UserError(f"[{name}] tracking needs the {name} package: pip install 'primekit[{name}]' "
                            f"(or remove the [{name}] table / --{name}-... flag)")


def tracking_kwargs(config: GepaTrackingFields, run_name: str, run_config: dict[str, Any]) -> dict[str, Any]:
    """``gepa.optimize``'s tracking arguments; ``run_config`` must hold no secret (see module docstring)."""
    kwargs: dict[str, Any] = {}
    if config.wandb is not None:
        init = {k: v for k, v in config.wandb.model_dump().items() if v not in (None, [])}
        init.setdefault("name", run_name)
        kwargs.update(use_wandb=True, wandb_init_kwargs={**init, "config": run_config})
    if config.mlflow is not None:
        kwargs.update(use_mlflow=True, mlflow_tracking_uri=config.mlflow.tracking_uri,
                      mlflow_experiment_name=config.mlflow.experiment_name)
    return kwargs
