"""A verifiers v1 taskset (``import verifiers.v1 as vf``, ``Taskset``/``Task``) as a primekit Environment.

How it runs (verifiers' v1 stack, 0.3.1 or 0.4.x, driven the way its own ``eval`` command drives it in-process):

- **loading**: the taskset module is found as verifiers finds it (:mod:`~evalkit.verifiers_compat.v1.loader`);
  env args become the ``[env]`` config (:mod:`~evalkit.verifiers_compat.v1.config`: the taskset's knobs, a seat's
  limits and harness settings); verifiers builds its env with ``vf.resolve_env_config`` + ``vf.load_environment``:
  ``SingleAgentEnv`` for a plain taskset, or the taskset's own ``Env`` (several seats, a scripted user, ...).
- **offline by default**: every seat runs primekit's harness ``primekit-harness`` (verifiers' ``null`` chat
  program started with this interpreter, see :mod:`~evalkit.verifiers_compat.v1.harness`) on the ``subprocess``
  runtime, or ``primekit-bash-harness`` (verifiers' ``bash`` harness, the same program with shell tools) when the
  env args choose ``bash`` and the runtime. verifiers' defaults (the ``bash`` harness on hosted ``prime`` sandboxes)
  need a login, the network and a ``uv`` it installs with pip; primekit never asks for them.
- **serving**: :meth:`TasksetEnvironment.serving` holds verifiers' ``Env.serving()`` (the taskset-wide shared
  tool servers from ``Taskset.toolsets``, the interception server) while a batch of rollouts runs, as verifiers'
  eval holds it for a run; a rollout outside a batch holds it for itself.
- **rows**: one per task (the taskset iterated, ``-n``/``-s`` picking tasks as verifiers' eval does, see
  :mod:`~evalkit.verifiers_compat.v1.api`), with the task's system prompt and prompt as messages and
  ``info.task_key`` naming the task.
- **rollout**: ``env.run_slot`` (one episode, with verifiers' own episode retries); the run's model context
  points at a :class:`~evalkit.verifiers_compat.v1.bridge.ModelBridgeServer` in front of primekit's ModelClient
  (one per client while the env is serving, so verifiers reuses one HTTP client for it), so every seat's model
  calls go through primekit's client. verifiers runs the harness, the task's
  ``setup``/``finalize``, tool servers, stop conditions and scoring and records everything on its traces;
  :mod:`~evalkit.verifiers_compat.v1.episode` turns the episode into the row.
- **files**: an eval run dir also gets verifiers' own ``traces.jsonl`` (one episode per line, verifiers' writer)
  and ``configs/resolved/eval.json`` (the env config), which verifiers' replay reads
  (:mod:`~evalkit.verifiers_compat.v1.traces`).
- **GEPA**: the system prompt is the tasks' ``system_prompt``; a candidate replaces it through
  ``Task.with_system_prompt`` (what verifiers' ``taskset.system_prompt`` override does). The ``tools`` component
  (and ``--tools-file``): the taskset's MCP tools, listed offline by :mod:`~evalkit.verifiers_compat.v1.tools`;
  verifiers' chat program lists the tools itself, so a candidate's descriptions are put into the model requests
  at the bridge (:meth:`~evalkit.verifiers_compat.v1.bridge.ModelBridgeServer.url_for`).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from evalkit.clients.base import ModelClient
from evalkit.core.errors import ENVIRONMENT, UserError
from evalkit.core.types import Message, RolloutState, SamplingArgs
from evalkit.envs.base import Environment
from evalkit.envs.tool_descriptions import TOOL_DESCRIPTIONS, describe, schema_descriptions
from evalkit.verifiers_compat.convert import to_openai_messages
from evalkit.verifiers_compat.v1 import api as v1_api
from evalkit.verifiers_compat.v1.bridge import ModelBridgeServer, bridge_key_var
from evalkit.verifiers_compat.v1.episode import copy_episode, copy_partial

_TASK = "primekit_v1_task"
logger = logging.getLogger(__name__)


def load_taskset_environment(source: Any, module: Any, env_args: dict[str, Any]) -> TasksetEnvironment:
    """Build verifiers' v1 env for the taskset module ``source`` names, wrapped (UserError for bad config)."""
    import verifiers.v1 as vf
    from pydantic import ValidationError

    from evalkit.verifiers_compat.v1.config import env_config_data, install_programs

    try:
        data = env_config_data(source.env_id, source.module_name, env_args)
        config = vf.resolve_env_config(data)
        install_programs(config)
        vf_env = vf.load_environment(config)
    except ValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": str(exc)}
        where = ".".join(str(part) for part in first.get("loc", ()))
        raise UserError(f"env args for v1 taskset '{source.env_id}' are invalid: {where}: {first.get('msg')}") from exc
    except (ImportError, AttributeError, TypeError, ValueError) as exc:
        raise UserError(f"verifiers could not load v1 taskset '{source.env_id}': {type(exc).__name__}: {exc}") from exc
    return TasksetEnvironment(vf_env, env_id=source.env_id)


class TasksetEnvironment(Environment):
    """A primekit Environment over a verifiers v1 env (see the module docstring)."""

    def __init__(self, vf_env: Any, *, env_id: str):
        from evalkit.verifiers_compat import signature_cache
        from evalkit.verifiers_compat.v1.config import seats

        signature_cache.install()  # verifiers' turn records ask pydantic for default factories' signatures
        self.vf_env = vf_env
        self.env_id = env_id
        self.taskset = vf_env.taskset
        self.infinite = not v1_api.is_bounded(self.taskset)
        self.multi_seat = len(seats(type(vf_env.config))) > 1
        self.sampling_args = SamplingArgs()
        self._tasks: dict[str, Any] = {}
        self._serving: _Serving | None = None
        self._listed_tools: list[dict[str, Any]] | None = None
        self._descriptions: dict[str, str] = {}
        self._run_slot_takes_on_trace = "on_trace" in inspect.signature(vf_env.run_slot).parameters  # verifiers 0.4
        first = next(iter(self._iterate(v1_api.take(self.taskset, 1))), None)
        self.system_prompt = first.data.system_prompt if first is not None else None

    def _iterate(self, view: Any) -> list[Any]:
        """The tasks of a taskset view; the taskset's ``load()`` is user code, so its failure is one line."""
        try:
            return list(view)
        except Exception as exc:
            raise UserError(
                f"v1 taskset '{self.env_id}' failed to load its tasks: {type(exc).__name__}: {exc}"
            ) from exc

    # ----- data -----------------------------------------------------------------------------
    @property
    def dataset(self) -> Any:
        """The taskset (one pool of tasks; GEPA splits it into train and validation)."""
        return self.taskset

    @property
    def eval_dataset(self) -> None:
        return None

    def get_dataset(self, n: int = -1, seed: int = 0, shuffle: bool = False) -> list[dict[str, Any]]:
        limit = None if n is None or n < 0 else n
        if limit is None and self.infinite:
            raise UserError(f"v1 taskset '{self.env_id}' is infinite; bound it with -n/--num-examples")
        try:
            view = v1_api.select(self.taskset, limit, seed, shuffle)
        except ValueError as exc:
            raise UserError(f"v1 taskset '{self.env_id}': {exc}") from exc
        rows = []
        for task in self._iterate(view):
            self._tasks[task.key] = task
            rows.append(self._row(task))
        return rows

    def get_eval_dataset(self, n: int = -1, seed: int = 0, shuffle: bool = False) -> list[dict[str, Any]]:
        return self.get_dataset(n, seed, shuffle)

    def example_ids(self, rows: list[dict[str, Any]], seed: int, shuffle: bool, split: str = "eval") -> list[int]:
        """The tasks' own ``idx`` (what verifiers' traces record), when each row has a distinct one; else positions."""
        own = [((row.get("info") or {}).get("task") or {}).get("idx") for row in rows]
        if all(type(v) is int for v in own) and len(set(own)) == len(own):
            return [int(v) for v in own]  # type: ignore[arg-type]
        return list(range(len(rows)))

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

    # ----- tool descriptions (GEPA's ``tools`` component, ``--tools-file``) -------------------------
    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        """The taskset's MCP tools as the chat program offers them (listed once, without a model), with the
        run's descriptions: what :mod:`evalkit.envs.tool_descriptions` reads and replaces. UserError when a
        tool server's tools cannot be listed offline."""
        if self._listed_tools is None:
            from evalkit.verifiers_compat.v1.tools import list_tool_schemas

            self._listed_tools = list_tool_schemas(self.vf_env, self.env_id)
        return describe(self._listed_tools, self._descriptions)

    @tool_schemas.setter
    def tool_schemas(self, schemas: list[dict[str, Any]]) -> None:
        self._descriptions = schema_descriptions(schemas)

    # ----- lifecycle -----------------------------------------------------------------------
    @asynccontextmanager
    async def serving(self) -> AsyncIterator[_Serving]:
        """verifiers' ``Env.serving()`` (shared tool servers, interception) held while any caller holds this:
        the first brings it up, the last takes it down. It runs in a task of its own (what it enters, it exits
        there), on one event loop: a second loop using the environment at the same time is refused. A failed
        start is every waiting caller's error; a failed teardown is logged (the rollouts are already over)."""
        loop = asyncio.get_running_loop()
        if self._serving is None:
            self._serving = _Serving(loop, self.vf_env)
        serving = self._serving
        if serving.loop is not loop:
            raise RuntimeError(f"v1 taskset '{self.env_id}' is serving rollouts on another event loop")
        serving.holders += 1
        try:
            await asyncio.shield(serving.ready)
            yield serving
        finally:
            serving.holders -= 1
            if serving.holders == 0:
                if self._serving is serving:
                    self._serving = None
                await serving.close()

    def run_files(self, run_dir: Path, kept: set[tuple[int, int]]) -> Any:
        """verifiers' ``traces.jsonl`` and resolved config beside the rows (see :mod:`.traces`)."""
        from evalkit.verifiers_compat.v1.traces import TraceFiles

        return TraceFiles(run_dir, kept, self.vf_env.config)

    # ----- rollout hooks (the skeleton is Environment.rollout) ---------------------------------
    def new_state(
        self, row: dict[str, Any], example_id: int, rollout_idx: int, system_prompt: str | None
    ) -> RolloutState:
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
        async with self.serving() as serving:
            bridge = await serving.bridge(client)
            # the run's (--tools-file) or the GEPA candidate's tool descriptions, put into its requests by the bridge
            described = bridge.url_for({**self._descriptions, **(TOOL_DESCRIPTIONS.get() or {})})
            ctx = vf.ModelContext(
                model=client.model,
                client=vf.EvalClientConfig(base_url=described, api_key_var=bridge_key_var()),
                sampling=vf.SamplingConfig(**sampling.to_dict()),
            )
            slot = self.vf_env.slots(task, 1)[0]
            minted: set[str] = set()
            try:
                episode = await self.vf_env.run_slot(slot, ctx, **self._trace_hook(minted))
                minted.update(trace.id for trace in episode.traces)
            except asyncio.CancelledError:  # a rollout timeout (or Ctrl-C): keep the turns done so far
                live = list(slot.traces or ())
                minted.update(trace.id for trace in live)
                copy_partial(live, state, bridge.take(minted), self.multi_seat)
                raise
            finally:
                calls = bridge.take(minted)
        copy_episode(episode, state, calls, self.multi_seat)

    def _trace_hook(self, minted: set[str]) -> dict[str, Any]:
        """``run_slot``'s ``on_trace`` (verifiers 0.4) collecting the id of every trace the episode mints, retried
        attempts' included, so their calls leave the bridge with the rollout (0.3.1 has no hook: a retried attempt's
        calls stay in the bridge until the run ends)."""
        return {"on_trace": lambda trace: minted.add(trace.id)} if self._run_slot_takes_on_trace else {}

    async def score_rollout(self, state: RolloutState, timeout: float | None) -> None:
        """Nothing to run: ``generate`` copied verifiers' reward and metrics; an errored episode keeps none."""
        if state.error is not None:
            state.metrics = {}


class _Serving:
    """verifiers' ``Env.serving()`` entered and exited in one task of its own (see
    :meth:`TasksetEnvironment.serving`)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, vf_env: Any):
        self.loop = loop
        self.holders = 0
        self.ready: asyncio.Future[None] = loop.create_future()
        self._stop = asyncio.Event()
        self._task = loop.create_task(self._serve(vf_env))
        self._bridges: dict[int, tuple[ModelClient, asyncio.Task[ModelBridgeServer]]] = {}

    async def bridge(self, client: ModelClient) -> ModelBridgeServer:
        """The model bridge in front of ``client`` while this lasts, started by the first rollout that asks."""
        held = self._bridges.get(id(client))
        if held is None or (held[1].done() and (held[1].cancelled() or held[1].exception() is not None)):
            held = self._bridges[id(client)] = (client, self.loop.create_task(ModelBridgeServer(client).start()))
        return await asyncio.shield(held[1])

    async def _serve(self, vf_env: Any) -> None:
        try:
            async with vf_env.serving():
                self.ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:
            if self.ready.done():
                raise
            if isinstance(exc, asyncio.CancelledError):
                self.ready.cancel()
                raise
            self.ready.set_exception(exc)

    async def close(self) -> None:
        self._stop.set()
        try:
            await self._task
        except Exception as exc:  # teardown of servers whose rollouts are over
            logger.warning("verifiers env teardown failed: %s: %s", type(exc).__name__, exc)
        starts = [started for _, started in self._bridges.values()]
        self._bridges.clear()
        for started in starts:
            started.cancel()  # a no-op for the started ones
        for bridge in await asyncio.gather(*starts, return_exceptions=True):
            if isinstance(bridge, ModelBridgeServer):
                await bridge.close()


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
