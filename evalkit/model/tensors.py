"""Where the engine's fused snapshot reads its tensors: a live transformers module or a model folder's safetensors.

Two sources behind one small interface (``config``, ``tensor(name)``, ``linear(prefix)``,
``rope()``, ``layout_unsupported()``), so :class:`~evalkit.model.weights.DecoderWeights` and the
fused forward have one construction path:

* :class:`ModuleTensors` -- a module handed in (RL's trainer module, peft LoRA layers merged on
  the fly; a weight update re-reads it).
* :class:`StoredModel` -- a model folder on disk (the converted embedded model, an RL export, a Hub
  snapshot). Eval, GEPA and ``prime serve`` only sample, and building the transformers module first
  cost them ~2 s of CPU per run: importing its modeling code (~1 s: masking, layers, loss
  utilities), then allocating and filling every parameter, then copying them again into the
  snapshot. The snapshot is read from ``model.safetensors`` (mmap) instead, and the module is
  built only when something needs it (:meth:`StoredModel.module`: ``Engine.model``, the Hugging
  Face fallback forward, a weight update).

Tensor names are those of a ``*ForCausalLM`` state dict (``model.layers.0.self_attn.q_proj.weight``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from evalkit.core.errors import UserError

WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"


def base_module(model: Any) -> Any:
    """The transformers module under a peft wrapper (``model`` itself when unwrapped)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def head_dim(config: Any) -> int:
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def rope_type(config: Any) -> str | None:
    """The config's RoPE variant, as transformers' rotary embeddings read it."""
    return (getattr(config, "rope_parameters", None) or {}).get("rope_type")


def layer_prefixes(config: Any) -> list[str]:
    return [f"model.layers.{i}" for i in range(config.num_hidden_layers)]


LAYER_LINEARS = (
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.o_proj",
    "mlp.gate_proj",
    "mlp.up_proj",
    "mlp.down_proj",
)
LAYER_NORMS = ("input_layernorm", "post_attention_layernorm")


class ModuleTensors:
    """The effective tensors of a live ``*ForCausalLM`` (peft LoRA deltas added to their base weights)."""

    def __init__(self, model: Any):
        self.hf = base_module(model)
        self.config = self.hf.config

    def tensor(self, name: str) -> torch.Tensor:
        return self.hf.get_parameter(name).detach()

    def linear(self, prefix: str) -> tuple[torch.Tensor, torch.Tensor | None]:
        weight, bias = effective_linear(self.hf.get_submodule(prefix))
        return weight.detach(), None if bias is None else bias.detach()

    def rope(self) -> tuple[torch.Tensor, float]:
        """The module's own rotary inverse frequencies and attention scaling."""
        rotary = self.hf.model.rotary_emb
        return rotary.inv_freq.detach().to(device="cpu", dtype=torch.float32), float(
            getattr(rotary, "attention_scaling", 1.0)
        )

    def layout_unsupported(self) -> str | None:
        """What in the module's layout the fused forward cannot compute (``None``: nothing)."""
        body = getattr(self.hf, "model", None)
        layers = getattr(body, "layers", None)
        if not layers or not all(hasattr(body, name) for name in ("embed_tokens", "norm", "rotary_emb")):
            return "an unfamiliar module layout"
        attn = layers[0].self_attn
        if hasattr(attn, "q_norm") or hasattr(attn, "k_norm"):
            return "q/k normalisation"
        if abs(float(getattr(attn, "scaling", head_dim(self.config) ** -0.5)) - head_dim(self.config) ** -0.5) > 1e-9:
            return "a non-standard attention scale"
        return None


class StoredModel:
    """A model folder the engine serves from its safetensors, building the transformers module only on demand.

    ``config``: the folder's transformers config (or, for a config.json that spells out every field,
    as the embedded model's cache does, a plain namespace of it: see ``evalkit.model.loading``).
    ``load`` builds the module (``evalkit.model.loading``'s loader in the serving dtype); it runs
    at most once, on the first :meth:`module` call, from whichever thread asks first.
    """

    def __init__(self, folder: Path, config: Any, load: Callable[[], Any]):
        self.folder = Path(folder)
        self.config = config
        self.generation_config = SimpleNamespace(eos_token_id=_generation_eos(self.folder, self.config))
        self._load = load
        self._module: Any = None
        self._lock = threading.Lock()
        self._tensors: dict[str, torch.Tensor] | None = None

    @staticmethod
    def has_weights(folder: Path) -> bool:
        """Whether ``folder`` holds safetensors weights this class reads (one file, or shards with an index)."""
        return (folder / WEIGHTS_FILE).is_file() or (folder / WEIGHTS_INDEX).is_file()

    @property
    def built(self) -> bool:
        """Whether the transformers module exists yet."""
        return self._module is not None

    def module(self) -> Any:
        """The transformers module of this folder (built on the first call)."""
        with self._lock:
            if self._module is None:
                self._module = self._load()
            return self._module

    # -- the tensor-source interface (see the module docstring) ---------------------------------

    def tensor(self, name: str) -> torch.Tensor:
        if name == "lm_head.weight" and _tied(self.config):
            name = "model.embed_tokens.weight"  # tied: transformers' lm_head is the embedding
        return self._read()[name]

    def linear(self, prefix: str) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.tensor(f"{prefix}.weight"), self._read().get(f"{prefix}.bias")

    def rope(self) -> tuple[torch.Tensor, float]:
        """Inverse frequencies and attention scaling computed from the config, as transformers'
        rotary embeddings of the fused architectures do (``default``: their own formula; the other
        static variants: transformers' RoPE init functions)."""
        kind = rope_type(self.config) or "default"
        if kind == "default":
            base, dim = self.config.rope_parameters["rope_theta"], head_dim(self.config)
            return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float) / dim)), 1.0
        from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

        inv_freq, scaling = ROPE_INIT_FUNCTIONS[kind](self.config)
        return inv_freq.to(torch.float32), float(scaling)

    def layout_unsupported(self) -> str | None:
        names = self._read()
        if any(".q_norm." in name or ".k_norm." in name for name in names):
            return "q/k normalisation"
        head = [] if _tied(self.config) else ["lm_head.weight"]
        needed = ["model.embed_tokens.weight", "model.norm.weight", *head] + [
            f"{layer}.{part}.weight" for layer in layer_prefixes(self.config) for part in (*LAYER_LINEARS, *LAYER_NORMS)
        ]
        missing = [name for name in needed if name not in names]
        return f"an unfamiliar weight layout (no {missing[0]})" if missing else None

    def release(self) -> None:
        """Drop the mapped file (after the snapshot is built; a later read maps it again)."""
        self._tensors = None

    def _read(self) -> dict[str, torch.Tensor]:
        if self._tensors is None:
            from safetensors.torch import load_file

            tensors: dict[str, torch.Tensor] = {}
            try:
                for file in _weight_files(self.folder):
                    tensors.update(load_file(str(file)))  # memory-mapped: pages are read as the snapshot copies them
            except Exception as exc:  # safetensors' own error type, a broken index, a missing shard
                raise UserError(f"cannot read the weights in {self.folder}: {type(exc).__name__}: {exc}") from None
            self._tensors = tensors
        return self._tensors


def tensor_source(model: Any) -> ModuleTensors | StoredModel:
    """``model`` as a tensor source: a :class:`StoredModel` as is, a module wrapped."""
    return model if isinstance(model, StoredModel) else ModuleTensors(model)


def model_config(model: Any) -> Any:
    """The transformers config of a module (peft-wrapped or not) or a :class:`StoredModel`."""
    return model.config if isinstance(model, StoredModel) else base_module(model).config


def _weight_files(folder: Path) -> list[Path]:
    if (folder / WEIGHTS_FILE).is_file():
        return [folder / WEIGHTS_FILE]
    index = json.loads((folder / WEIGHTS_INDEX).read_text())
    return [folder / name for name in sorted(set(index["weight_map"].values()))]


def _generation_eos(folder: Path, config: Any) -> Any:
    """The EOS id(s) transformers' ``generation_config`` would hold: ``generation_config.json``'s,
    else the model config's."""
    path = folder / "generation_config.json"
    if path.is_file():
        return json.loads(path.read_text()).get("eos_token_id")
    return getattr(config, "eos_token_id", None)


def _tied(config: Any) -> bool:
    return bool(getattr(config, "tie_word_embeddings", False))


def effective_linear(module: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(weight, bias) of a linear layer as it computes now: a peft LoRA layer's active, unmerged
    adapters are added to its base weight (a merged or disabled adapter adds nothing)."""
    base = getattr(module, "base_layer", module)
    weight = base.weight
    bias = getattr(base, "bias", None)
    if base is not module and not getattr(module, "merged", False) and not getattr(module, "disable_adapters", False):
        for name in getattr(module, "active_adapters", []):
            if name in getattr(module, "lora_A", {}):
                weight = weight + module.get_delta_weight(name).to(weight.dtype)
    return weight, bias
