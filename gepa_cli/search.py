"""The search fields (:class:`gepa_cli.search_options.GepaSearchFields`) turned into ``gepa.optimize`` arguments.

Strings gepa accepts as they are (selection strategy, frontier, acceptance, merge, cache, module
selector) pass through; the rest become gepa's strategy objects: a subsampling validation policy (gepa
0.1.4 ships only ``full_eval``), several proposals per iteration (``SameParentSampling``) and which of
them to keep (``BestImprovement``). The reflection prompt template is not passed: proposals come from
our :class:`~gepa_cli.reflection.Proposer`, which renders it.
"""

from __future__ import annotations

import random
from typing import Any

from gepa.strategies.eval_policy import FullEvaluationPolicy

from gepa_cli.search_options import GepaSearchFields


class SubsampleEvaluationPolicy(FullEvaluationPolicy):
    """Score each new candidate on ``size`` validation examples drawn for it (the seed on all of them).

    The draw depends only on the run's seed and the candidate's number, so a resumed run draws what the
    killed one would have. The best candidate is the one with the highest mean over what it was scored
    on (gepa's full-eval rule, which already allows partial coverage; ties go to wider coverage).
    """

    def __init__(self, size: int, seed: int):
        self.size = size
        self.seed = seed

    def get_eval_batch(self, loader: Any, state: Any, target_program_idx: int | None = None) -> list[Any]:
        ids = list(loader.all_ids())
        if self.size >= len(ids):
            return ids
        rng = random.Random(f"{self.seed}:{len(state.program_candidates)}")
        return sorted(rng.sample(ids, self.size))


TRAIN_ID_OFFSET = 1_000_000
"""Training examples' ids start here, so no training id equals a validation id (0, 1, ...)."""


class TrainLoader:
    """The training examples as a gepa ``DataLoader`` whose ids never collide with the validation set's.

    gepa keys its evaluation cache by (candidate, example id), and a plain list gets ids 0..n-1 for the
    training and the validation set alike: a parent's score on training example 3 would be read back as
    its score on validation example 3. Offsetting the training ids keeps the two apart.
    """

    def __init__(self, examples: list[Any]):
        self.examples = list(examples)

    def all_ids(self) -> list[int]:
        return [TRAIN_ID_OFFSET + i for i in range(len(self.examples))]

    def fetch(self, ids: Any) -> list[Any]:
        return [self.examples[i - TRAIN_ID_OFFSET] for i in ids]

    def __len__(self) -> int:
        return len(self.examples)


def val_cost(config: GepaSearchFields, num_val: int) -> int:
    """Rollouts one accepted candidate's validation pass costs."""
    if config.val_evaluation_policy == "subsample" and config.val_subsample_size is not None:
        return min(config.val_subsample_size, num_val)
    return num_val


def gepa_search_kwargs(config: GepaSearchFields, seed: int) -> dict[str, Any]:
    """The ``gepa.optimize`` keyword arguments the search fields set."""
    from gepa.strategies.proposal_sampling import SameParentSampling
    from gepa.strategies.proposal_selection import BestImprovement

    kwargs: dict[str, Any] = {
        "candidate_selection_strategy": config.candidate_selection_strategy,
        "frontier_type": config.frontier_type,
        "acceptance_criterion": config.acceptance_criterion,
        "use_merge": config.use_merge,
        "max_merge_invocations": config.max_merge_invocations,
        "merge_val_overlap_floor": config.merge_val_overlap_floor,
        "cache_evaluation": config.cache_evaluation,
        "module_selector": config.module_selector,
    }
    if config.val_evaluation_policy == "subsample":
        kwargs["val_evaluation_policy"] = SubsampleEvaluationPolicy(config.val_subsample_size or 1, seed)
    if config.proposals_per_iteration > 1:
        kwargs["sampling_strategy"] = SameParentSampling(config.proposals_per_iteration)
    if config.proposal_selection == "best":
        kwargs["selection_strategy"] = BestImprovement()
    return kwargs
