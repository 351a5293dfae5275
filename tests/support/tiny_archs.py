"""Tiny random-weight models of the architectures the engine meets (Llama family and beyond), built from configs.

Test-only. Shared by the engine's architecture tests and its stored-weights tests.
"""

from __future__ import annotations

import torch

VOCAB = 49152
SMALL = dict(
    vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, max_position_embeddings=256, bos_token_id=1, eos_token_id=2, pad_token_id=2,
)


def build_arch(kind: str, seed: int = 0):
    """A random-weight ``*ForCausalLM`` of ``kind`` (see the branches) on the SmolLM2 vocabulary, in eval mode."""
    import transformers

    torch.manual_seed(seed)
    extra: dict = {}
    if kind == "llama3-rope":
        name, extra = "Llama", {"rope_parameters": {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                                                    "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                    "original_max_position_embeddings": 64}}  # fmt: skip
    elif kind in ("linear-rope", "yarn-rope"):
        name, extra = (
            "Llama",
            {"rope_parameters": {"rope_type": kind.split("-")[0], "rope_theta": 10000.0, "factor": 4.0}},
        )
    elif kind == "qwen3":
        name, extra = "Qwen3", {"head_dim": 16}
    elif kind == "gemma":
        name, extra = "Gemma", {"head_dim": 16, "hidden_act": "gelu_pytorch_tanh"}
    elif kind == "gemma2":
        name, extra = "Gemma2", {"head_dim": 16, "sliding_window": 6,
                                 "layer_types": ["sliding_attention", "full_attention"],
                                 "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0}  # fmt: skip
    elif kind == "mistral-window":
        name, extra = "Mistral", {"sliding_window": 6}
    elif kind == "mistral":
        name, extra = "Mistral", {"sliding_window": None}
    else:
        name = {"qwen2": "Qwen2", "phi3": "Phi3", "llama": "Llama"}[kind]
    # untied: a random tied model mostly repeats its input token, which would hide mistakes
    config = getattr(transformers, f"{name}Config")(**SMALL, tie_word_embeddings=kind == "qwen2", **extra)
    return getattr(transformers, f"{name}ForCausalLM")(config).eval()
