"""The rollout-source contract between the trainer and whatever generates rollouts.

A source owns a :class:`~evalkit.clients.base.ModelClient` (``client``) that environments call
through :func:`evalkit.rollouts.run_groups`; every :class:`~evalkit.types.Completion` it returns must
carry ``prompt_token_ids``, ``completion_token_ids`` and ``logprobs`` (of each sampled token under the
temperature-scaled distribution), because the trainer's importance ratio needs them.

``sync(policy, step)`` makes the client sample from the trainer's current weights. The trainer calls
it only while no generation is running (between steps), so a source never sees weights change
under an in-flight request. ``reseed(seed)`` makes the next generation reproducible (resume).
``close()`` releases processes and memory. Errors a user can fix raise
:class:`~evalkit.errors.UserError`; a failed request raises ``ModelCallError`` from the client and
becomes an errored rollout (reward 0), never a crashed run.
"""

from __future__ import annotations

from typing import Any, Protocol

from evalkit.clients.base import ModelClient


class RolloutSource(Protocol):
    client: ModelClient
    name: str

    def sync(self, policy: Any, step: int) -> None: ...

    def reseed(self, seed: int) -> None: ...

    def close(self) -> None: ...
