"""Turning a :mod:`~evalkit.model.registry` source into a torch model and its tokenizer, offline.

The embedded GGUF is dequantized by transformers once (about 30 s) and cached as safetensors +
config + tokenizer under ``$PRIMEKIT_HOME/models/<name>`` (default ``~/.cache/primekit``); later
loads take about two seconds. ``save_pretrained`` refuses GGUF-loaded models, so the state dict
is written directly. The cache folder appears by an atomic rename of a finished temp folder, so
a conversion killed half way leaves nothing that a later run would mistake for a cache.

Nothing here touches the network: every ``from_pretrained`` is ``local_files_only``.
Progress goes to stderr, because a first run that sits silent for 30 s looks hung.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from evalkit.core.defaults import DEFAULT_MODEL
from evalkit.core.errors import UserError
from evalkit.model.registry import KNOWN_MODELS, GgufModel, LocalDirModel, ModelSource

if TYPE_CHECKING:
    import torch

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""SmolLM2-Instruct's own ChatML template, used when a tokenizer arrives without one."""

_CACHE_FORMAT = 1
_MARKER = "primekit.json"

DTYPES = {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp32": "float32", "float32": "float32"}


def dtype_name(dtype: str | None) -> str:
    """Canonical dtype name (``bfloat16`` or ``float32``); UserError for anything else (``auto`` is
    resolved before this, by :func:`evalkit.model.dtypes.choose_dtype`)."""
    key = (dtype or "bf16").lower()
    if key not in DTYPES:
        raise UserError(f"unsupported dtype '{dtype}' for the embedded engine (use auto, bf16, fp32 or q4)")
    return DTYPES[key]


def torch_dtype(dtype: str | None) -> torch.dtype:
    import torch

    return getattr(torch, dtype_name(dtype))


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def load_model(source: ModelSource, dtype: str = "float32") -> tuple[Any, Any]:
    """(``model``, ``tokenizer``): a ``PreTrainedModel`` on CPU in eval mode and its tokenizer.

    float32 by default because this module is the master copy an RL trainer may train; an engine
    that only serves can load it in the dtype it serves in (half the memory). An adapter is merged
    into the weights.
    """
    folder, tokenizer = _folder_and_tokenizer(source)
    model = _load_folder(folder, dtype)
    if isinstance(source, LocalDirModel) and source.adapter is not None:
        model = _merge_adapter(model, source.adapter)
    return _named(model, source.name), tokenizer


def open_model(source: ModelSource, dtype: str) -> tuple[Any, Any]:
    """(``model``, ``tokenizer``) for an engine that only serves ``source``: a
    :class:`~evalkit.model.tensors.StoredModel` (its transformers module, in ``dtype``, built only
    if something asks for it) when the weights are a folder's safetensors; else, with an adapter to
    merge or other weight files, the module itself (:func:`load_model`)."""
    from evalkit.model.tensors import StoredModel

    if isinstance(source, LocalDirModel) and source.adapter is not None:
        return load_model(source, dtype)
    folder, tokenizer = _folder_and_tokenizer(source)
    if not StoredModel.has_weights(folder):
        return _named(_load_folder(folder, dtype), source.name), tokenizer
    config = _stored_config(folder, embedded=isinstance(source, GgufModel))
    config._name_or_path = source.name
    return StoredModel(folder, config, lambda: _named(_load_folder(folder, dtype), source.name)), tokenizer


def _stored_config(folder: Path, embedded: bool) -> Any:
    """The config an engine serving ``folder`` reads: transformers' ``AutoConfig``; for the embedded
    model's cache, whose config.json :func:`_convert` writes in full (every field, RoPE parameters
    in transformers 5's form), a plain namespace of that file. That skips importing the model's
    config class, which pulls in ~0.6 s of transformers' modeling dependencies."""
    if embedded:
        fields = json.loads((folder / "config.json").read_text())
        if "rope_parameters" in fields:  # a cache converted by transformers 4 lacks it: read it as transformers does
            return SimpleNamespace(**fields)
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot load the model in {folder}: {exc}") from None


def _folder_and_tokenizer(source: ModelSource) -> tuple[Path, Any]:
    """The folder holding ``source``'s weights (converting an embedded GGUF on first use) and its tokenizer."""
    if isinstance(source, GgufModel):
        folder = ensure_converted(source)
        tokenizer = _exact_decoding(_load_cached_tokenizer(folder))  # also for caches converted before this
    else:
        folder = source.path if source.path is not None else ensure_converted(_require_base(source))
        tokenizer = _tokenizer_for(source, folder)
    ensure_chat_template(tokenizer)
    return folder, tokenizer


def _named(model: Any, name: str) -> Any:
    model.config._name_or_path = name
    return model.eval()


def ensure_converted(spec: GgufModel) -> Path:
    """The converted folder of ``spec``, converting the GGUF first if no finished cache exists."""
    final = spec.converted_dir()
    if _is_complete(final):
        return final
    gguf = spec.require_gguf()
    log(f"converting {spec.display} GGUF → safetensors (one time, ~30 s) into {final} ...")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    try:
        _convert(gguf, tmp)
        tmp.chmod(0o755)  # mkdtemp's 0700 would make the cache private for no reason
        try:
            os.rename(tmp, final)
        except OSError:
            if not _is_complete(final):  # not a lost race with another process: a real failure
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def _is_complete(folder: Path) -> bool:
    try:
        marker = json.loads((folder / _MARKER).read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return marker.get("format") == _CACHE_FORMAT and (folder / "model.safetensors").is_file()


def _convert(gguf: Path, out: Path) -> None:
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs = {"gguf_file": gguf.name, "local_files_only": True}
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), **kwargs)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), dtype=torch.float32, **kwargs)
    tied = bool(getattr(model.config, "tie_word_embeddings", False))
    state = {
        key: value.detach().contiguous()
        for key, value in model.state_dict().items()
        if not (tied and key == "lm_head.weight")  # safetensors refuses shared tensors; tying restores it
    }
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    config = model.config.to_dict()
    for key in ("quantization_config", "_name_or_path", "_model_name_or_path"):
        config.pop(key, None)
    config["dtype"] = "float32"
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
    ensure_chat_template(tokenizer)
    _exact_decoding(tokenizer).save_pretrained(str(out))
    (out / _MARKER).write_text(json.dumps({"format": _CACHE_FORMAT, "source": gguf.name, "bytes": gguf.stat().st_size}))


def _exact_decoding(tokenizer: Any) -> Any:
    """Turn off ``clean_up_tokenization_spaces`` on an embedded model's BPE tokenizer: some
    transformers releases set it when reading a GGUF, and then either strip spaces before
    punctuation from replies (older releases) or warn on every run (5.17, seen on the H100)."""
    tokenizer.clean_up_tokenization_spaces = False
    return tokenizer


@contextlib.contextmanager
def _quiet_progress_bars() -> Iterator[None]:
    """Our own one-line message replaces transformers' per-tensor progress bar for fast loads."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def _load_folder(folder: Path, dtype: str = "float32") -> Any:
    from transformers import AutoModelForCausalLM

    try:
        with _quiet_progress_bars():
            return AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch_dtype(dtype), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot load the model in {folder}: {exc}") from None


def _load_tokenizer(folder: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)


def _load_cached_tokenizer(folder: Path) -> Any:
    """The embedded model cache's tokenizer. Its tokenizer_config.json names the class
    ``AutoTokenizer`` chose when :func:`_convert` saved it; ``TokenizersBackend`` (what transformers
    5 gives SmolLM2) is loaded directly, which is where ``AutoTokenizer`` ends for it too, without
    loading the model's config class first (~0.6 s of imports). Anything else goes through ``AutoTokenizer``."""
    try:
        named = json.loads((folder / "tokenizer_config.json").read_text()).get("tokenizer_class")
    except (OSError, json.JSONDecodeError):
        named = None
    if named != "TokenizersBackend":
        return _load_tokenizer(folder)
    from transformers import TokenizersBackend

    return TokenizersBackend.from_pretrained(str(folder), local_files_only=True)


def _has_tokenizer(folder: Path) -> bool:
    return (folder / "tokenizer.json").is_file() or (folder / "tokenizer_config.json").is_file()


def _require_base(source: LocalDirModel) -> GgufModel:
    if source.base is None:
        raise UserError(f"model {source.name} has neither weights nor an embedded base model")
    return source.base


def _tokenizer_for(source: LocalDirModel, folder: Path) -> Any:
    """The folder's tokenizer, else the adapter's, else the embedded base's (RL exports may omit it)."""
    for candidate in (folder, source.adapter):
        if candidate is not None and _has_tokenizer(candidate):
            return _load_tokenizer(candidate)
    fallback = source.base or KNOWN_MODELS[DEFAULT_MODEL]
    config = json.loads((folder / "config.json").read_text()) if (folder / "config.json").is_file() else {}
    if source.base is None and config.get("vocab_size") != 49152:
        raise UserError(f"model folder {folder} has no tokenizer files (tokenizer.json); save the tokenizer there")
    if source.base is None:
        log(f"note: {folder} has no tokenizer; using {fallback.name}'s (same vocabulary size)")
    return _load_tokenizer(ensure_converted(fallback))


def _merge_adapter(model: Any, adapter: Path) -> Any:
    try:
        from peft import PeftModel
    except ImportError:
        raise UserError("loading a LoRA adapter needs peft: pip install 'primekit[train]'") from None
    return PeftModel.from_pretrained(model, str(adapter), is_trainable=False).merge_and_unload()


def ensure_chat_template(tokenizer: Any) -> None:
    """Give ``tokenizer`` SmolLM2's ChatML template if it has none (GGUF exports can drop it)."""
    if not getattr(tokenizer, "chat_template", None):
        tokenizer.chat_template = CHATML_TEMPLATE
    if tokenizer.pad_token_id is None and tokenizer.eos_token_id is not None:
        tokenizer.pad_token = tokenizer.eos_token
