"""The one rule that picks a model's backend from a :class:`~evalkit.clients.spec.ClientSpec`.

Checked in this order (eval, GEPA's task and reflection models, and RL all use it):

0. ``engine`` set (RL's trainer-owned engine): the embedded engine client over that engine.
   ``served`` (RL's vLLM server): an OpenAI-compatible server at ``base_url``, asked for ``model`` as
   the server names it (even a path).
1. ``endpoint_id`` set (TOML configs): that endpoint of endpoints.toml; a missing id is an error.
2. no model and no base URL: the embedded default model ``local/smollm2-135m``.
3. ``litellm/<provider>/<model>``: litellm (any provider it speaks; keys from the provider's own
   env vars such as ``ANTHROPIC_API_KEY``, or ``-k``). Needs ``pip install 'primekit[litellm]'``.
   ``mock/<script>``: the scripted model of :mod:`evalkit.clients.mock` (tests, dry checks).
4. ``local/...``, ``hf/<org>/<name>`` (from the local Hugging Face cache, never downloaded), a path
   (``./x``, ``/x``, ``~/x``) or a folder holding a model: the embedded engine.
5. with no ``-b``: a name that is an ``endpoint_id`` in endpoints.toml (``-e``, default
   ``./configs/endpoints.toml``): that endpoint (several rows = replicas, used round-robin).
   With ``-e`` given, any other name is an error.
6. with no ``-b``: a short alias of an embedded model (``smollm2-135m``): the embedded engine.
7. with neither ``-b`` nor ``$OPENAI_BASE_URL``: ``<org>/<name>`` present in the local Hugging Face
   hub cache (``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``): the
   embedded engine, as ``hf/<org>/<name>``.
8. anything else: an OpenAI-compatible server at ``-b``, else ``$OPENAI_BASE_URL``, else
   ``https://api.openai.com/v1``; key from ``-k VAR`` (default ``OPENAI_API_KEY``, required only
   for the OpenAI default URL or when ``-k`` is given).

A base URL without a model is an error (the server's model name is needed). Nothing here sends a
request or imports a heavy library; mistakes surface as UserError before any rollout.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from evalkit.clients.endpoints import Endpoint, default_endpoints_path, load_endpoints
from evalkit.clients.spec import DEFAULT_BASE_URL, LITELLM_PREFIX, MOCK_PREFIX, ClientSpec
from evalkit.core.defaults import DEFAULT_MODEL
from evalkit.core.errors import UserError

Backend = Literal["local", "litellm", "endpoint", "http", "mock"]
LOCAL_PREFIXES = ("local/", "hf/")
MODEL_FILES = ("config.json", "model.safetensors", "adapter_config.json")


@dataclass(frozen=True)
class Route:
    """Where a spec's requests go: ``backend``, the name that backend is asked for, and its target."""

    backend: Backend
    model: str
    """The embedded model id/folder, the litellm model (``anthropic/...``), or the server's model name."""
    base_url: str | None = None
    """``http`` only: the base URL requests go to."""
    endpoints: tuple[Endpoint, ...] = ()
    """``endpoint`` only: the replica rows."""


def route(spec: ClientSpec) -> Route:
    """The backend for ``spec`` by the rule in this module's docstring."""
    if spec.engine is not None:
        return Route("local", spec.model or DEFAULT_MODEL)
    if spec.served:
        return Route("http", str(spec.model), base_url=spec.base_url)
    if spec.endpoint_id:
        return _endpoint_route(resolve_endpoint(spec.endpoint_id, spec.endpoints_path))
    model = spec.model
    if model is None:
        if spec.base_url is None:
            return Route("local", DEFAULT_MODEL)
        raise UserError("a base URL was given without a model; pass -m MODEL as the server names it")
    if model.startswith(LITELLM_PREFIX):
        return Route("litellm", _litellm_model(model))
    if model.startswith(MOCK_PREFIX):
        return Route("mock", model)
    if is_local_model(model):
        return Route("local", model)
    if spec.base_url is None:
        rows = _endpoint_rows(model, spec.endpoints_path)
        if rows:
            return _endpoint_route(rows)
        if _is_embedded_alias(model):
            return Route("local", model)
        if not os.environ.get("OPENAI_BASE_URL") and in_hf_cache(model):
            return Route("local", f"hf/{model}")
    return Route("http", model, base_url=spec.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL)


def is_embedded(spec: ClientSpec) -> bool:
    """Whether ``spec`` is served in-process (it then returns token ids and logprobs, and rambles more)."""
    return route(spec).backend == "local"


def is_local_model(model: str) -> bool:
    """``local/...`` and ``hf/...`` ids, paths (``./weights/step_3``) and folders that hold a model.

    A name like ``Qwen/Qwen3-8B`` is a server's model name unless a folder of that name holds a model
    (or, by rule 7, the Hugging Face cache holds it and no server URL is set).
    """
    if model.startswith((*LOCAL_PREFIXES, ".", "/", "~")):
        return True
    path = Path(model).expanduser()
    return path.is_dir() and any((path / name).exists() for name in MODEL_FILES)


def in_hf_cache(repo_id: str) -> bool:
    """Whether ``<org>/<name>`` is in the local Hugging Face hub cache, by the same lookup the engine
    loads it with (:func:`evalkit.model.registry.hub_snapshot`), so routing and loading agree."""
    from evalkit.model.registry import hub_model_id, hub_snapshot

    return hub_model_id(repo_id) == repo_id and hub_snapshot(repo_id) is not None


def resolve_endpoint(endpoint_id: str, endpoints_path: str | Path | None = None) -> list[Endpoint]:
    """The replica rows of ``endpoint_id``; UserError naming the known ids when it is missing."""
    file = Path(endpoints_path) if endpoints_path else default_endpoints_path()
    if file is None or not file.is_file():
        raise UserError(
            f"endpoint '{endpoint_id}' needs an endpoints file; none at {file or 'configs/endpoints.toml'} "
            "(pass -e PATH or create one with `prime lab setup`)"
        )
    endpoints = load_endpoints(file)
    if endpoint_id not in endpoints:
        known = ", ".join(sorted(endpoints)) or "none"
        raise UserError(f"endpoint id '{endpoint_id}' not found in {file} (known: {known})")
    return endpoints[endpoint_id]


def _endpoint_rows(model: str, endpoints_path: str | None) -> list[Endpoint] | None:
    """Rule 5: the rows when ``model`` is an endpoint id; with ``-e`` given, a name it lacks is an error."""
    if endpoints_path and not Path(endpoints_path).is_file():
        raise UserError(f"endpoints file not found: {endpoints_path}")
    file = Path(endpoints_path) if endpoints_path else default_endpoints_path()
    if file is None:
        return None
    endpoints = load_endpoints(file)
    if model in endpoints:
        return endpoints[model]
    if endpoints_path:  # the user pointed at this file, so -m names one of its endpoints
        known = ", ".join(sorted(endpoints)) or "none"
        raise UserError(f"endpoint id '{model}' not found in {file} (known: {known}); "
                        "or pass -b URL to use the model name directly")
    return None


def _endpoint_route(rows: list[Endpoint]) -> Route:
    if rows[0].type == "local":
        return Route("local", rows[0].model)
    return Route("endpoint", rows[0].model, endpoints=tuple(rows))


def _litellm_model(model: str) -> str:
    name = model[len(LITELLM_PREFIX):]
    provider, _, rest = name.partition("/")
    if not provider or not rest:
        raise UserError(f"'{model}' needs a provider and a model: litellm/<provider>/<model>, "
                        "e.g. litellm/anthropic/claude-sonnet-4-5")
    return name


def _is_embedded_alias(model: str) -> bool:
    """Short names of the embedded models (``smollm2-135m``); not Hub ids, which a server may serve."""
    try:
        from evalkit.model.registry import ALIASES
    except ImportError:
        return False
    return "/" not in model and model in ALIASES
