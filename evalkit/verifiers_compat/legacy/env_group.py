"""verifiers' ``EnvGroup`` the way ``vf-eval`` runs it: each group goes, scoring included, to one sub-environment.

An ``EnvGroup`` concatenates its sub-environments' rows and marks each with its route (``info["env_id"]``:
a name, or a list of names for nested groups). ``vf-eval`` calls ``EnvGroup.run_group``, which hands the
whole group to the routed sub-environment's ``run_group``: that sub-environment's rubric scores it, so a row
carries only its own sub-environment's reward and metric names. (The group-level ``EnvGroupRubric`` would
fill every sub-environment's names with 0.0, which halves their means; verifiers' eval never uses it.)
primekit runs the rollout through ``EnvGroup.rollout`` (which routes the same way) and scores with
:func:`routed_env`'s rubric. Nothing here imports verifiers: a group is recognised by its ``env_map``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ROUTE_KEY = "env_id"
"""The info key verifiers' EnvGroup routes by (``ENV_GROUP_INFO_KEY``)."""


def is_env_group(vf_env: Any) -> bool:
    return isinstance(getattr(vf_env, "env_map", None), Mapping)


def leaf_envs(vf_env: Any) -> list[Any]:
    """The environments that run and score rollouts: ``vf_env`` itself, or every sub-environment of a group."""
    if not is_env_group(vf_env):
        return [vf_env]
    return [leaf for sub in vf_env.env_map.values() for leaf in leaf_envs(sub)]


def routed_env(vf_env: Any, vf_state: Any) -> Any:
    """The sub-environment a finished rollout belongs to (``vf_env`` itself when it is not a group, or when
    the state names no known route)."""
    env = vf_env
    info = vf_state.get("info") if vf_state is not None else None
    route = info.get(ROUTE_KEY) if isinstance(info, Mapping) else None
    names = [route] if isinstance(route, str) else list(route) if isinstance(route, (list, tuple)) else []
    for name in names:
        if not is_env_group(env) or str(name) not in env.env_map:
            break
        env = env.env_map[str(name)]
    return env
