"""The in-process rollout source on the project's batching engine (:mod:`evalkit.model.engine`).

The engine samples from its own fused snapshot of the trainer's module (LoRA deltas merged in), with
continuous batching on its own worker thread; ``sync`` calls ``engine.update_weights()``, which
re-snapshots the module between decode steps. The trainer calls it only between its optimizer
steps, so a snapshot never sees half-updated weights. Models the engine cannot run (non-Llama
architectures) use :class:`~rl_backend.sources.torch_source.TorchSource` instead.

Randomness: every request gets its own seed, ``base + n`` for the n-th request since the last
``reseed``, so a step's rollouts are reproducible on resume yet differ within a group.
"""

from __future__ import annotations

import time
from typing import Any

from evalkit.errors import ModelCallError
from evalkit.types import Completion, Message, SamplingArgs, Usage


class EngineClient:
    """ModelClient over an :class:`evalkit.model.engine.Engine`, returning token ids and logprobs."""

    def __init__(self, engine: Any, model_name: str, seed: int = 0):
        self.engine = engine
        self.model = model_name
        self.base_url: str | None = None
        self._seed = seed
        self._count = 0

    def reseed(self, seed: int) -> None:
        self._seed, self._count = seed, 0

    async def chat(self, messages: list[Message], sampling: SamplingArgs, tools: list[dict[str, Any]] | None = None) -> Completion:
        from evalkit.model.requests import InvalidRequest

        seeded = sampling.merged({"seed": self._seed * 100_003 + self._count})
        self._count += 1
        try:
            prompt_ids = self.engine.encode_chat(messages, tools)
            result = await self.engine.generate(prompt_ids, seeded)
        except InvalidRequest as exc:
            raise ModelCallError(f"the engine refused the request: {exc}") from exc
        except RuntimeError as exc:  # EngineError and friends: a failed call, recorded on the rollout
            raise ModelCallError(f"the engine failed: {exc}") from exc
        return Completion(
            text=result.text,
            finish_reason=result.finish_reason,
            usage=Usage(input_tokens=len(result.prompt_ids), output_tokens=len(result.token_ids)),
            prompt_token_ids=list(result.prompt_ids),
            completion_token_ids=list(result.token_ids),
            logprobs=list(result.logprobs),
        )

    async def aclose(self) -> None:
        return None


class EngineSource:
    name = "torch"

    def __init__(self, policy: Any, model_name: str, seed: int, max_batch_size: int, dtype: str):
        from evalkit.model.engine import Engine

        self.policy = policy
        self.engine = Engine(policy.model, policy.tokenizer, dtype=dtype, max_batch=max_batch_size, name=model_name)
        self.client = EngineClient(self.engine, model_name, seed)
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
