"""What is specific to each rollout backend: weight sync and export (requests go through evalkit's clients).

The in-process engine (:mod:`.engine_source`: its fused Llama path or its Hugging Face forward
fallback for other architectures) and a vLLM server (:mod:`.vllm_source`) both implement
:class:`rl_backend.sources.base.RolloutSource`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def make_source(backend: str, config: Any, policy: Any, run_dir: Path) -> Any:
    """The rollout source for ``backend`` (``torch`` or ``vllm``), already holding the policy's weights."""
    if backend == "vllm":
        from rl_backend.sources.vllm_source import VLLMSource

        return VLLMSource(config, policy, run_dir)
    from rl_backend.sources.engine_source import EngineSource

    inference = config.inference
    return EngineSource(policy, config.model, config.seed, inference.max_batch_size, inference.dtype, inference.engine)
