"""A verifiers v1 taskset (``import verifiers.v1 as vf``, ``Taskset``/``Task``) as a primekit Environment.

How it runs (verifiers 0.3.1's v1 stack, driven the way its ``eval`` command drives it in-process):

- **loading**: the taskset module is found as verifiers finds it (:mod:`~evalkit.verifiers_compat.v1_loader`);
  env args become the taskset config (``--env.taskset.<knob>`` in verifiers' CLI); verifiers builds its env
  with ``vf.resolve_env_config`` + ``vf.load_environment``. Only the single-agent env is supported.
- **offline by default**: the agent runs primekit's harness ``primekit-harness`` (verifiers' ``null`` chat
  program started with this interpreter, see :mod:`~evalkit.verifiers_compat.v1_harness`) on the
  ``subprocess`` runtime. verifiers' defaults (the ``bash`` harness on hosted ``prime`` sandboxes) need a
  login, the network and a ``uv`` it installs with pip; primekit never asks for them.
- **rows**: one per task (the taskset iterated, ``shuffle``/``head`` as verifiers' own views), with the
  task's system prompt and prompt as messages and ``info.task_key`` naming the task.
- **rollout**: ``env.run_episode(task, ctx)``; the model context points at a per-rollout
  :class:`~evalkit.verifiers_compat.v1_bridge.ModelBridgeServer` in front of primekit's ModelClient.
  verifiers runs the harness, the task's ``setup``/``finalize``, tool servers, stop conditions and scoring
  (``@vf.reward`` / ``@vf.metric``) and records everything on its ``Trace``.
- **results**: reward = the trace's weighted reward sum; metrics = each reward's score and each metric;
  ``stop_condition``, ``is_truncated``, turns from the trace; the trace's errors (a raising reward or hook,
  a failed model call, a harness that exited non-zero) are the row's ``error`` (reward 0), as verifiers
  words them, each recorded with the kind its verifiers type names (a provider error: ``model``; any
  other: ``environment``).
- **hooks**: this class implements :class:`~evalkit.envs.base.Environment`'s rollout hooks
  (``new_state`` finds the task, ``generate`` runs the episode, ``score_rollout`` has nothing left to run).
- **GEPA**: the system prompt is the tasks' ``system_prompt``; a candidate replaces it through
  ``Task.with_system_prompt`` (what verifiers' ``taskset.system_prompt`` override does).
"""

from __future__ import annotations

from typing import Any

from evalkit.clients.base import ModelClient
from evalkit.envs.base import Environment
from evalkit.errors import ENVIRONMENT, MODEL, UserError
from evalkit.types import Message, RolloutState, SamplingArgs
from evalkit.verifiers_compat.convert import to_openai_messages
from evalkit.verifiers_compat.v1_bridge import ModelBridgeServer, bridge_key_var
from evalkit.verifiers_compat.v1_harness import HARNESS_ID

_TASK = "primekit_v1_task"


def load_taskset_environment(source: Any, module: Any, env_args: dict[str, Any]) -> "TasksetEnvironment":
    """Build verifiers' v1 env for the taskset module ``source`` names, wrapped (UserError for bad config)."""
    import verifiers.v1 as vf
    from pydantic import ValidationError

    from evalkit.verifiers_compat.v1_loader import own_env_class

    own = own_env_class(module)
    if own is not None and not issubclass(own, vf.SingleAgentEnv):  # said before its config fails to validate
        raise UserError(f"v1 taskset '{source.env_id}' brings its own multi-agent env ({own.__name__}); primekit "
                        "runs single-agent v1 tasksets only (verifiers' own `eval` runs this one)")
    taskset_id = source.module_name
    data = {
        "taskset": {"id": taskset_id, **env_args},
        "agent": {"harness": {"id": HARNESS_ID}, "runtime": {"type": "subprocess"}},
    }
    try:
        config = vf.resolve_env_config(data)
        vf_env = vf.load_environment(config)
    except ValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": str(exc)}
        where = ".".join(str(part) for part in first.get("loc", ()))
        raise UserError(f"env args for v1 taskset '{source.env_id}' are invalid: {where}: {first.get('msg')}") from exc
    except (ImportError, AttributeError, TypeError, ValueError) as exc:
        raise UserError(f"verifiers could not load v1 taskset '{source.env_id}': {type(exc).__name__}: {exc}") from exc
    if not isinstance(vf_env, vf.SingleAgentEnv):
        raise UserError(
            f"v1 taskset '{source.env_id}' brings its own multi-agent env ({type(vf_env).__name__}); "
            "primekit runs single-agent v1 tasksets only"
        )
    if vf_env.taskset.toolsets(vf_env.taskset.config):
        raise UserError(f"v1 taskset '{source.env_id}' has taskset-wide shared tool servers, which primekit does not "
                        "run yet (per-task tool servers from Task.toolsets work)")
    return TasksetEnvironment(vf_env, env_id=source.env_id)


class TasksetEnvironment(Environment):
    """A primekit Environment over a verifiers v1 single-agent env (see the module docstring)."""

    def __init__(self, vf_env: Any, *, env_id: str):
        self.vf_env = vf_env
        self.env_id = env_id
        self.taskset = vf_env.taskset
        self.infinite = bool(self.taskset.INFINITE)
        self.sampling_args = SamplingArgs()
        self._tasks: dict[str, Any] = {}
        first = next(iter(self._iterate(self.taskset.head(1))), None)
        self.system_prompt = first.data.system_prompt if first is not None else None

    def _iterate(self, view: Any) -> list[Any]:
        """The tasks of a taskset view; the taskset's ``load()`` is user code, so its failure is one line."""
        try:
            return list(view)
        except Exception as exc:
            raise UserError(f"v1 taskset '{self.env_id}' failed to load its tasks: {type(exc).__name__}: {exc}") from exc

    # ----- data -----------------------------------------------------------------------------
    @property
    def dataset(self) -> Any:
        """The taskset (one pool of tasks; GEPA splits it into train and validation)."""
        return self.taskset

    @property
    def eval_dataset(self) -> None:
        return None

    def get_dataset(self, n: int = -1, seed: int = 0, shuffle: bool = False) -> list[dict[str, Any]]:
        view = self.taskset
        if n is None or n < 0:
            if view.INFINITE:
                raise UserError(f"v1 taskset '{self.env_id}' is infinite; bound it with -n/--num-examples")
        if shuffle:
            view = (view.head(n) if view.INFINITE else view).shuffle(seed)
        if n is not None and n >= 0:
            view = view.head(n)
        rows = []
        for task in self._iterate(view):
            self._tasks[task.key] = task
            rows.append(self._row(task))
        return rows

    def get_eval_dataset(self, n: int = -1, seed: int = 0, shuffle: bool = False) -> list[dict[str, Any]]:
        return self.get_dataset(n, seed, shuffle)

    def _row(self, task: Any) -> dict[str, Any]:
        data = task.data
        answer = getattr(data, "answer", None)
        return {
            "prompt": task_prompt(data),
            "answer": "" if answer is None else str(answer),
            "info": {"task_key": task.key, "task": data.model_dump(mode="json", exclude_none=True)},
        }

    def format_prompt(self, row: dict[str, Any], system_prompt: str | None = None) -> list[Message]:
        messages = [dict(m) for m in row.get("prompt") or []]
        if system_prompt is not None:
            messages = [m for m in messages if m.get("role") != "system"]
            messages.insert(0, {"role": "system", "content": system_prompt})
        return messages

    # ----- rollout hooks (the skeleton is Environment.rollout) ---------------------------------
    def new_state(self, row: dict[str, Any], example_id: int, rollout_idx: int, system_prompt: str | None) -> RolloutState:
        """The opening state, holding the row's task (with the candidate system prompt, if any) for ``generate``."""
        state = super().new_state(row, example_id, rollout_idx, system_prompt)
        task = self._tasks.get(str(state.info.get("task_key")))
        if task is not None and system_prompt is not None:
            task = task.with_system_prompt(system_prompt)
        state.extra[_TASK] = task
        return state

    async def generate(self, client: ModelClient, state: RolloutState, sampling: SamplingArgs) -> None:
        """One episode run by verifiers through a per-rollout model bridge; verifiers scores inside it, so
        :meth:`score_rollout` has nothing left to run (``score_timeout`` cannot bound that scoring apart
        from the episode; the model request timeout still bounds each call)."""
        import verifiers.v1 as vf

        task = state.extra.pop(_TASK, None)
        if task is None:
            state.record_error(ENVIRONMENT, "environment raised KeyError: row names no task of this taskset")
            return
        async with ModelBridgeServer(client) as bridge:
            ctx = vf.ModelContext(
                model=client.model,
                client=vf.EvalClientConfig(base_url=bridge.base_url, api_key_var=bridge_key_var()),
                sampling=vf.SamplingConfig(**sampling.to_dict()),
            )
            episode = await self.vf_env.run_episode(task, ctx)
            state.responses = list(bridge.completions)
        copy_episode(episode, state)

    async def score_rollout(self, state: RolloutState, timeout: float | None) -> None:
        """Nothing to run: ``generate`` copied verifiers' reward and metrics; an errored episode keeps none."""
        if state.error is not None:
            state.metrics = {}


def task_prompt(data: Any) -> list[Message]:
    """A v1 task's opening messages: its system prompt, then its prompt (text or messages)."""
    messages: list[Message] = []
    if data.system_prompt:
        messages.append({"role": "system", "content": data.system_prompt})
    if isinstance(data.prompt, str):
        messages.append({"role": "user", "content": data.prompt})
    elif data.prompt:
        messages.extend(to_openai_messages(data.prompt))
    return messages


def copy_episode(episode: Any, state: RolloutState) -> None:
    """The single trace's conversation, rewards, metrics, stop condition and errors onto ``state``."""
    errors = [(_kind(e), f"{e.type}: {e.message}") for e in episode.errors]
    if episode.traces:
        trace = episode.traces[0]
        nodes = trace.branches[-1].nodes if trace.branches else []
        first = next((i for i, node in enumerate(nodes) if node.sampled), len(nodes))
        state.completion = to_openai_messages(node.message for node in nodes[first:])
        state.turns = trace.num_turns
        state.stop_condition = trace.stop_condition
        state.is_truncated = bool(trace.is_truncated)
        state.reward = float(trace.reward)
        metrics = {name: r.score for name, r in trace.rewards.items() if r is not None}
        metrics.update({name: v for name, v in trace.metrics.items() if v is not None})
        state.metrics = {name: float(v) for name, v in metrics.items()}
        state.extra = {**trace.info, "trace_id": trace.id}
        errors = [(_kind(e), f"{e.type}: {e.message}") for e in trace.errors] + errors
        if not trace.ok and not errors:
            errors.append((ENVIRONMENT, f"verifiers marked the rollout failed (stop condition {trace.stop_condition})"))
    elif not errors:
        errors.append((ENVIRONMENT, "verifiers ran no agent for this task"))
    for kind, message in errors:
        state.record_error(kind, message)


_MODEL_ERROR_TYPES = frozenset({"ProviderError", "OverlongPromptError"})
"""verifiers v1's error types for a failed model request (``verifiers.v1.errors``); every other type
(harness, toolset, task hook or reward, sandbox, env, interception) is environment code's."""


def _kind(error: Any) -> str:
    """A verifiers error's kind, from its recorded type (never from its message)."""
    return MODEL if error.type in _MODEL_ERROR_TYPES else ENVIRONMENT
