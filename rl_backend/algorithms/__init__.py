"""Training algorithms as prime-rl names them (``[algo] type``): each one small class in the plain registry
:data:`ALGORITHMS`, stating which loss component its action tokens feed and how it assigns credit.

The loss is a sum of three components, each over its own member tokens (:mod:`rl_backend.loss_components`):
``rl`` (the policy loss of ``[trainer.loss]`` on advantages), ``ce`` (weighted negative log-likelihood) and
``ref_kl`` (the reverse KL to a reference model as the per-token signal). An algorithm names the component its
sampled tokens feed (:attr:`Algorithm.action_component`) and, for ``echo``, the one environment-provided tokens
feed. Pure Python (no torch), so the config and the plan can read them.

``available`` says whether `prime rl run` can train with it; the one that is not (``hierarchical_grpo``: no
proposer-solver environment here) is refused before any rollout with what it needs.
"""

from __future__ import annotations

from rl_backend.algorithms.base import COMPONENTS, Algorithm, Trace
from rl_backend.algorithms.distill import OPD, OPSD, SFTDistill
from rl_backend.algorithms.echo import Echo, Span, observation_weights
from rl_backend.algorithms.group import GRPO, RAE, HierarchicalGRPO, LengthPenalty, MaxRL

ALGORITHMS: dict[str, type[Algorithm]] = {
    algo.name: algo for algo in (GRPO, MaxRL, RAE, HierarchicalGRPO, OPD, SFTDistill, OPSD, Echo)
}
ALGORITHM_NAMES = tuple(ALGORITHMS)

__all__ = ["ALGORITHMS", "ALGORITHM_NAMES", "COMPONENTS", "Algorithm", "Echo", "GRPO", "HierarchicalGRPO",
           "LengthPenalty", "MaxRL", "OPD", "OPSD", "RAE", "SFTDistill", "Span", "Trace", "observation_weights"]
