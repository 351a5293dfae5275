"""The rollout-source contract between the trainer and whatever generates its rollouts.

A source is only what is specific to one inference backend: keeping the sampler's weights in step
with the trainer's, and exporting them. Requests go through a client of :mod:`evalkit.clients`
(the same clients eval and GEPA use): the embedded engine's
:class:`~evalkit.clients.local.LocalClient` over an engine built on the trainer's module, or the
OpenAI-compatible :class:`~evalkit.clients.openai_client.OpenAIClient` against a vLLM server.

* ``client``: a :class:`~evalkit.clients.base.ModelClient` that environments call through
  :func:`evalkit.eval.rollouts.run_groups` (or the eval runner). Every :class:`~evalkit.core.types.Completion`
  it returns carries ``prompt_token_ids``, ``completion_token_ids``, ``logprobs`` (of each sampled
  token under the temperature-scaled distribution, which the trainer's importance ratio compares
  against) and parsed ``tool_calls``.
* ``sampling``: settings every request must carry for that (``logprobs``; for vLLM also
  ``return_token_ids``); the trainer merges its own sampling over them.
* ``sync(policy, step)`` makes the client sample from the trainer's current weights. The trainer
  calls it only while no generation is running (between steps), so a request never sees weights
  change under it. ``reseed(seed)`` makes the next generation reproducible (resume) where the
  backend can.
* ``export_model()`` returns a plain (LoRA merged) torch module with the weights of the last
  ``sync``, for ``weights/step_N``; valid only at a sync point.
* ``close()`` releases processes and memory (the trainer closes ``client`` on its event loop first).

Errors a user can fix raise :class:`~evalkit.core.errors.UserError`; a failed request raises
``ModelCallError`` from the client and becomes an errored rollout (reward 0), never a crashed run.
"""

from __future__ import annotations

from typing import Any, Protocol

from evalkit.clients.base import ModelClient
from evalkit.core.types import SamplingArgs


class RolloutSource(Protocol):
    client: ModelClient
    name: str
    sampling: SamplingArgs

    def sync(self, policy: Any, step: int) -> None: ...

    def reseed(self, seed: int) -> None: ...

    def export_model(self) -> Any: ...

    def close(self) -> None: ...
