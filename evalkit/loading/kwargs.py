"""Settings applied to a loaded environment from the command line: vf-eval's ``-x`` and ``-i``.

``-x/--extra-env-kwargs '{"max_turns": 3}'`` means what verifiers' ``Environment.set_kwargs`` does:
for each key, call ``set_<key>(value)`` when the environment has such a method, else set the
attribute. One difference on purpose: a key naming neither a setter nor an existing attribute is an
error here (verifiers would add an attribute nothing reads, so a typo would change nothing silently).
An environment with its own ``set_kwargs`` (a wrapped verifiers environment) gets the dict as is.
"""

from __future__ import annotations

from typing import Any

from evalkit.core.errors import UserError


def apply_extra_env_kwargs(env: Any, kwargs: dict[str, Any], env_id: str) -> None:
    """Apply ``kwargs`` to ``env`` (see the module docstring); unknown keys are one UserError naming them."""
    if not kwargs:
        return
    own = getattr(env, "set_kwargs", None)
    if callable(own):
        own(**kwargs)
        return
    unknown = [key for key in kwargs if not _settable(env, key)]
    if unknown:
        known = sorted(k for k, v in vars(env).items() if not k.startswith("_") and not callable(v))
        raise UserError(
            f"-x/--extra-env-kwargs: environment '{env_id}' has no setting {', '.join(map(repr, unknown))}; "
            f"its settings: {', '.join(known) or 'none'} (environment arguments go in -a/--env-args)"
        )
    for key, value in kwargs.items():
        setter = getattr(env, f"set_{key}", None)
        if callable(setter):
            setter(value)
        else:
            setattr(env, key, value)


def _settable(env: Any, key: str) -> bool:
    if key.startswith("_"):
        return False
    if callable(getattr(env, f"set_{key}", None)):
        return True
    return hasattr(env, key) and not callable(getattr(env, key))


def require_independent_scoring(env: Any, env_id: str) -> None:
    """``-i``: native rubrics score every rollout on its own already; an environment that scores whole
    groups (it overrides ``score_group``) must offer ``set_independent_scoring`` or the flag is refused."""
    from evalkit.envs.base import Environment

    setter = getattr(env, "set_independent_scoring", None)
    if callable(setter):
        setter(True)
        return
    own = getattr(type(env), "score_group", None)
    if own is not None and own is not getattr(Environment, "score_group", None):
        raise UserError(
            f"-i/--independent-scoring: environment '{env_id}' scores its rollouts by group and cannot score "
            "them one by one here; drop -i"
        )
