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

verifiers' spellings are accepted as written: ``api_base_url`` for ``url``, ``api_key_var`` for ``key``,
``api_client_type`` for ``type``, and the OpenAI chat types ``openai_chat_completions`` and
``openai_chat_completions_token`` for ``openai`` (primekit's HTTP client speaks chat completions; the
other verifiers client types are refused with that reason). The older Python registry
``configs/endpoints.py`` (``ENDPOINTS = {"id": {"model": ..., "url": ..., "key": ...}, ...}``, a value may be
a list of replicas) is read too, as data: only a literal ``ENDPOINTS`` assignment, never executed.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evalkit.core.errors import ConfigError
from evalkit.core.tomlio import load_toml, validate

DEFAULT_ENDPOINTS_PATH = Path("configs/endpoints.toml")
LEGACY_ENDPOINTS_PATH = Path("configs/endpoints.py")

OPENAI_CHAT_TYPES = ("openai", "openai_chat_completions", "openai_chat_completions_token")
"""verifiers client types that are OpenAI chat completions, i.e. what primekit's HTTP client sends."""
_ALIASES = (("url", "api_base_url"), ("key", "api_key_var"), ("type", "api_client_type"))


class Endpoint(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _verifiers_spellings(cls, data: Any) -> Any:
        """verifiers' field names and chat client types, normalized to primekit's (see the module docstring)."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for ours, theirs in _ALIASES:
            if theirs in data:
                if ours in data and data[ours] != data[theirs]:
                    raise ValueError(f"'{ours}' and '{theirs}' are the same setting with different values; set one")
                data[ours] = data.pop(theirs)
        kind = data.get("type")
        if isinstance(kind, str) and kind in OPENAI_CHAT_TYPES:
            data["type"] = "openai"
        elif isinstance(kind, str) and kind != "local":
            raise ValueError(
                f"endpoint type '{kind}' is not supported: primekit sends OpenAI chat completions "
                f"(type = \"openai\" or \"openai_chat_completions\") or runs the embedded engine (type = \"local\")"
            )
        return data

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
    raw = read_python_registry(file) if file.suffix == ".py" else load_toml(file)
    parsed = validate(EndpointsFile, raw, file)
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
    """``./configs/endpoints.toml`` when it exists (the file `prime lab setup` writes), else
    ``./configs/endpoints.py``."""
    for candidate in (DEFAULT_ENDPOINTS_PATH, LEGACY_ENDPOINTS_PATH):
        if candidate.is_file():
            return candidate
    return None


def read_python_registry(file: Path) -> dict[str, Any]:
    """``ENDPOINTS = {...}`` of a Python endpoint registry as ``{"endpoint": [rows]}``, read with ``ast`` (never
    run)."""
    if not file.is_file():
        raise ConfigError(f"endpoints file not found: {file}")
    try:
        tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
    except SyntaxError as exc:
        raise ConfigError(f"{file} is not valid Python: {exc.msg} (line {exc.lineno})") from exc
    value = None
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(t, ast.Name) and t.id == "ENDPOINTS" for t in targets) and node.value is not None:
            try:
                value = ast.literal_eval(node.value)
            except ValueError as exc:
                raise ConfigError(f"{file}: ENDPOINTS must be a literal dict of dicts (it is read, not run)") from exc
    if not isinstance(value, dict):
        raise ConfigError(
            f"{file} has no ENDPOINTS = {{...}} dict; write configs/endpoints.toml instead (see `prime lab setup`)"
        )
    rows = []
    for endpoint_id, entry in value.items():
        for replica in entry if isinstance(entry, list) else [entry]:
            if not isinstance(replica, dict):
                raise ConfigError(f"{file}: ENDPOINTS['{endpoint_id}'] must be a dict (or a list of dicts)")
            rows.append({"endpoint_id": str(endpoint_id), **replica})
    return {"endpoint": rows}
