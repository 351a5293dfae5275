"""primekit's library: environments, rubrics, parsers, model clients, the embedded engine and the eval runner.

The public API, importable from here (each name loads its module on first use, so ``import evalkit`` stays light)::

    from evalkit import SingleTurnEnv, Rubric, Parser          # write an environment
    from evalkit import EvalConfig, run_eval                   # run one from Python
    from evalkit import ClientSpec, make_client                # a model client by the CLI's rules

Everything else is internal and may move: ``evalkit.core`` (the bottom layer), ``evalkit.vocabulary`` (shared config
fields), ``evalkit.loading``, ``evalkit.clients``, ``evalkit.model``, ``evalkit.serving``, ``evalkit.eval``,
``evalkit.report``, ``evalkit.verifiers_compat``.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "Environment": "evalkit.envs", "SingleTurnEnv": "evalkit.envs", "MultiTurnEnv": "evalkit.envs",
    "ToolEnv": "evalkit.envs", "Rubric": "evalkit.envs", "fast_reward": "evalkit.envs", "Parser": "evalkit.envs",
    "XMLParser": "evalkit.envs", "ThinkParser": "evalkit.envs", "tool_schema": "evalkit.envs",
    "EvalConfig": "evalkit.eval.config", "run_eval": "evalkit.eval.runner", "arun_eval": "evalkit.eval.runner",
    "ClientSpec": "evalkit.clients.spec", "make_client": "evalkit.clients.factory",
    "ModelClient": "evalkit.clients.base", "UserError": "evalkit.core.errors",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'evalkit' has no attribute {name!r}")
    value = getattr(import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
