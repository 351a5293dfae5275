"""Which teacher the held-out eval also scores once before training: the bar a distilled student is measured by.

A run's teachers are ``opd``'s ``[algo.teacher]`` and ``sft``'s ``[algo.sampling.source]`` (``opsd`` reads the
policy itself, so it has none). A held-out environment takes the teacher of the training environment of the same
name, else the run's only teacher; with several teachers and no name in common, it has none.
"""

from __future__ import annotations

from rl_backend.algo_config import FrozenModelConfig
from rl_backend.config import RLConfig


def held_out_teachers(config: RLConfig, eval_names: list[str]) -> dict[str, tuple[FrozenModelConfig, str]]:
    """``eval env name -> (teacher, where it is configured)`` for the held-out environments that have one."""
    found: dict[str, tuple[FrozenModelConfig, str]] = {}
    for env in config.env:
        algo = config.algo_of(env)
        prefix = f"env '{env.label}' algo" if env.algo is not None else "algo"
        if algo.teacher is not None:
            found[env.label] = (algo.teacher, f"{prefix}.teacher")
        elif isinstance(algo.sampling.source, FrozenModelConfig):
            found[env.label] = (algo.sampling.source, f"{prefix}.sampling.source")
    distinct = {frozen.model_dump_json(): (frozen, where) for frozen, where in found.values()}
    only = next(iter(distinct.values())) if len(distinct) == 1 else None
    out = {name: found.get(name, only) for name in eval_names}
    return {name: teacher for name, teacher in out.items() if teacher is not None}
