"""Loading the model to train, by the same names every other command accepts.

``local/smollm2-135m`` (the embedded GGUF, converted once by :mod:`evalkit.model.loading`), a local
Hugging Face folder (e.g. an earlier run's ``weights/step_N/``) or a peft adapter folder (merged
into its base). No network is touched.
"""

from __future__ import annotations

from typing import Any

from evalkit.core.errors import UserError


def load_model_and_tokenizer(model: str, dtype: str = "float32", device: str = "cpu") -> tuple[Any, Any]:
    """(torch model in eval mode, in ``dtype`` on ``device``; tokenizer with a pad token and chat template)."""
    import torch

    from evalkit.model.loading import load_model
    from evalkit.model.registry import resolve_model

    net, tokenizer = load_model(resolve_model(model))
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if not getattr(tokenizer, "chat_template", None):
        raise UserError(f"the tokenizer of '{model}' has no chat template; RL on chat environments needs one")
    net = net.to(device=device, dtype={"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype])
    net.eval()
    return net, tokenizer
