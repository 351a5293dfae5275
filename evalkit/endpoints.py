"""``configs/endpoints.toml``: named model endpoints, so ``-m NAME`` is all a user types.

Format::

    [[endpoint]]
    endpoint_id = "qwen3-8b"          # what -m / endpoint_id refers to
    model = "Qwen/Qwen3-8B"           # the model name sent to the server
    url = "http://localhost:8000/v1"
    key = "VLLM_API_KEY"              # the NAME of the env var holding the key (never the key)
    type = "openai"                   # "openai" (any OpenAI-compatible server) or "local" (embedded engine)

Several rows with one ``endpoint_id`` are replicas of one model; the client spreads requests over
them round-robin. A ``key`` that looks like a literal secret is refused, because this file is
meant to be committed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from evalkit.errors import ConfigError
from evalkit.tomlio import load_toml, validate

DEFAULT_ENDPOINTS_PATH = Path("configs/endpoints.toml")


class Endpoint(BaseModel):
    model_config = ConfigDict(extra="forbid")

    endpoint_id: str
    """The short name users pass as ``-m``."""
    model: str
    """The model name the server expects (or, for ``type = "local"``, a local model id or folder)."""
    url: str = ""
    """Base URL of the OpenAI-compatible API, e.g. ``http://localhost:8000/v1``."""
    key: str | None = None
    """Name of the environment variable that holds the API key (not the key itself)."""
    type: Literal["openai", "local"] = "openai"
    """``openai``: any OpenAI-compatible server; ``local``: the embedded engine."""


class EndpointsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    endpoint: list[Endpoint] = Field(default_factory=list)
    """One row per endpoint (replicas share an ``endpoint_id``)."""


def load_endpoints(path: str | Path) -> dict[str, list[Endpoint]]:
    """Endpoints grouped by id, in file order; relative ``local`` model folders resolve against the file."""
    file = Path(path)
    parsed = validate(EndpointsFile, load_toml(file), file)
    grouped: dict[str, list[Endpoint]] = {}
    for row in parsed.endpoint:
        if row.type == "openai" and not row.url:
            raise ConfigError(f"{file}: endpoint '{row.endpoint_id}' needs a url")
        if row.key and (row.key.startswith(("sk-", "Bearer ")) or len(row.key) > 64):
            raise ConfigError(
                f"{file}: endpoint '{row.endpoint_id}' key must be the NAME of an environment variable "
                "(e.g. key = \"OPENAI_API_KEY\"), not the key itself"
            )
        if row.type == "local" and row.model.startswith("."):
            row = row.model_copy(update={"model": str((file.parent / row.model).resolve())})
        grouped.setdefault(row.endpoint_id, []).append(row)
    for rows in grouped.values():
        if len({(r.model, r.type) for r in rows}) > 1:
            raise ConfigError(f"{file}: replicas of endpoint '{rows[0].endpoint_id}' must share model and type")
    return grouped


def default_endpoints_path() -> Path | None:
    """``./configs/endpoints.toml`` when it exists (the file `prime lab setup` writes)."""
    return DEFAULT_ENDPOINTS_PATH if DEFAULT_ENDPOINTS_PATH.is_file() else None
