"""The in-process rollout source: the project's batching engine over the trainer's own module.

Requests go through :class:`~evalkit.clients.local.LocalClient` (the embedded model's client, the
one ``prime eval run -m local/...`` uses; built by :func:`evalkit.clients.factory.make_client`) over an
:class:`~evalkit.model.engine.Engine` built on the
trainer's module: completions carry token ids, logprobs and parsed tool calls. The engine samples
from its own fused snapshot of that module (LoRA deltas merged in), with continuous batching on
its own worker thread; ``sync`` calls ``engine.update_weights()``, which re-snapshots the module
between decode steps. The trainer calls it only between its optimizer steps, so a snapshot never
sees half-updated weights. Architectures the fused path cannot run exactly (Qwen3, Gemma, Phi, ...)
run on the engine's Hugging Face forward fallback behind the same worker and contracts
(``[inference] engine`` chooses: ``auto``, ``fused`` or ``hf``). The engine sits on the trainer's
device, so a trainer placed with ``[trainer] gpus`` samples on that GPU too.

Randomness: after ``reseed(seed)`` the n-th request gets its own seed derived from ``seed`` and
``n``, so a step's rollouts are reproducible on resume yet differ within a group.
"""

from __future__ import annotations

import time
from typing import Any

from evalkit.core.types import SamplingArgs


class EngineSource:
    name = "torch"

    def __init__(self, policy: Any, model_name: str, seed: int, max_batch_size: int, dtype: str, backend: str = "auto"):
        from evalkit.clients.factory import make_client
        from evalkit.clients.spec import ClientSpec
        from evalkit.model.engine import Engine

        self.policy = policy
        self.engine = Engine(
            policy.model, policy.tokenizer, dtype=dtype, max_batch=max_batch_size, name=model_name,
            device=str(policy.device), backend=backend,
        )
        self.client: Any = make_client(ClientSpec(model=model_name, engine=self.engine))
        self.client.reseed(seed)
        self.sampling = SamplingArgs(logprobs=True)
        self.sync_seconds = 0.0

    def sync(self, policy: Any, step: int) -> None:
        started = time.perf_counter()
        self.engine.update_weights()
        self.sync_seconds = time.perf_counter() - started

    def reseed(self, seed: int) -> None:
        self.client.reseed(seed)

    def export_model(self) -> Any:
        """A merged plain copy of the trainer's module, for ``weights/step_N``."""
        return self.policy.merged_copy()

    def close(self) -> None:
        self.engine.close()
