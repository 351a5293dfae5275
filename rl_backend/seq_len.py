"""The default ``trainer.max_seq_len``, derived from what the config says instead of a fixed number.

A fixed default (2048) contradicted configs that never named a sequence length but asked for long replies
(``[sampling] max_tokens = 4096``): the config stopped on a value primekit chose. The default is now, in order:

1. ``inference.max_model_len`` when set: the sampler's context is the longest sample there can be;
2. else ``max(2048, max_tokens + PROMPT_ROOM)``: the old default, or the replies plus room for the prompt;
3. capped by the model's context length when it is known without the network (the embedded models' own,
   or ``max_position_embeddings`` in a local folder's or the Hugging Face cache's ``config.json``).

A value the user wrote is kept as written (and checked). Torch-free: reads at most one JSON file.
"""

from __future__ import annotations

import json
from pathlib import Path

DEFAULT_MAX_SEQ_LEN = 2048
PROMPT_ROOM = 1024
"""Tokens of prompt the derived default leaves beside ``max_tokens`` of reply."""


def model_context_length(model: str) -> int | None:
    """The model's context length when known offline (embedded model, local folder, cached Hub snapshot), else None."""
    from evalkit.model.registry import ALIASES, KNOWN_MODELS, hub_model_id, hub_snapshot

    name = ALIASES.get(model, model)
    if name in KNOWN_MODELS:
        return KNOWN_MODELS[name].context_length
    folder = Path(model).expanduser()
    if not folder.is_dir():
        repo = hub_model_id(model)
        try:
            snapshot = hub_snapshot(repo) if repo is not None else None
        except Exception:  # a broken cache is not this config's problem; the model loader says so later
            snapshot = None
        if snapshot is None:
            return None
        folder = snapshot
    try:
        data = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for table in (data, data.get("text_config") or {}):
        value = table.get("max_position_embeddings") if isinstance(table, dict) else None
        if isinstance(value, int) and value > 0:
            return value
    return None


def derived_max_seq_len(max_tokens: int, max_model_len: int | None, context: int | None) -> int:
    """The default ``trainer.max_seq_len`` for these settings (see the module docstring)."""
    if max_model_len is not None:
        return max_model_len
    wanted = max(DEFAULT_MAX_SEQ_LEN, max_tokens + PROMPT_ROOM)
    return min(wanted, context) if context is not None else wanted
