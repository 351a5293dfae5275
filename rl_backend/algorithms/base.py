"""What every algorithm shares: the rollout facts credit reads (:class:`Trace`) and the class contract."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

Component = Literal["rl", "ce", "ref_kl"]
COMPONENTS: tuple[Component, ...] = ("rl", "ce", "ref_kl")


@dataclass(frozen=True)
class Trace:
    """One scored rollout as credit assignment sees it."""

    reward: float
    output_tokens: int = 0
    """Tokens the model generated (all turns)."""
    input_tokens: int = 0
    """Tokens it conditioned on but did not generate (prompt, tool and user turns)."""
    turns: int = 1
    agent: str = "agent"
    """The seat whose trace this is (``rae`` keeps one baseline per agent)."""


class Algorithm:
    """``credit(group) -> one advantage per trace`` (``None``: the algorithm assigns no credit).

    A subclass sets ``name``, ``paper`` (where the method is defined), ``action_component`` (the loss
    component its sampled tokens feed), ``group_relative`` (a group whose rewards are all equal carries no
    signal, so the difficulty filter may drop it) and, while primekit cannot run it end to end, ``missing``
    (what it still needs; ``None``: available).
    """

    name: ClassVar[str]
    paper: ClassVar[str]
    action_component: ClassVar[Component] = "rl"
    observation_component: ClassVar[Component | None] = None
    """The component environment-provided tokens feed (``echo``: ``ce``); ``None``: they are never trained."""
    group_relative: ClassVar[bool] = True
    missing: ClassVar[str | None] = None

    @classmethod
    def available(cls) -> bool:
        return cls.missing is None

    def credit(self, group: Sequence[Trace]) -> list[float] | None:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps so that ``--resume`` continues the same credit (``rae``'s baselines)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
