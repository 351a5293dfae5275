"""A legacy verifiers environment (``import verifiers as vf``, verifiers 0.3.x) as a primekit Environment.

What verifiers does and what primekit does:

- **rows**: verifiers' own ``build_dataset()`` / ``build_eval_dataset()`` (what its ``get_dataset()`` reads:
  dataset builder functions called lazily, ``system_prompt`` and ``few_shot`` applied, ``example_id`` added),
  then primekit's ``-n``/shuffle (the eval split falls back to the training split, as in verifiers).
  ``system_prompt`` is the verifiers environment's, so GEPA optimizes it and a candidate replaces the
  row's leading system message while the few-shot messages stay.
- **rollout**: ``vf_env.rollout(input, client, model, sampling_args)``, i.e. verifiers' own multi-turn loop,
  ``env_response``, tools, ``@vf.stop`` conditions, ``setup_state`` and cleanup handlers, with a
  :class:`~evalkit.verifiers_compat.legacy.bridge.ModelClientBridge` as the client; ``input`` is the row as
  ``vf-eval`` delivers it (:func:`rollout_input`).
- **scoring**: verifiers' ``rubric.score_group`` (what ``vf_env.generate`` uses by default), by the
  environment that ran the rollout (an ``EnvGroup``'s member, as ``vf-eval`` scores it). A rubric without
  group-level reward functions is scored per rollout, as soon as it finishes (a group of one gives the same
  numbers); a rubric with group-level functions (``states``/``completions``/... parameters) is scored once per
  group in :meth:`score_group`, which :func:`evalkit.eval.rollouts.run_groups` calls. Then ``rubric.cleanup``.
- **ids**: a row whose ``info`` carries a task payload (``info["task"]``) is, to verifiers, that task: its
  ``prompt``, ``answer``, ``info`` and ``example_id`` come from the payload. So the row is written under the
  task's own id (:meth:`VerifiersEnvironment.task_ids`; the row's index when the payload has none or two tasks
  share one) with the payload's ``answer`` and ``info``, as ``vf-eval`` writes it.
- **results**: verifiers' reward and metrics (``num_turns``, ``total_tool_calls``, ``<tool>_calls``, each
  reward function's name), ``stop_condition``, ``is_truncated``, completion as OpenAI chat dicts, and one
  :class:`~evalkit.core.types.Completion` per model turn in ``RolloutState.responses`` (token ids and logprobs when
  the client reports them). ``RolloutState.extra`` is the verifiers ``State``, so ``-C key`` picks its keys.
  pass@k counts a rollout as passed at the environment's ``pass_threshold`` (verifiers' default 0.5).

Errors are data, as everywhere in primekit: a failed model call or a ``vf.Error`` that verifiers records, an
exception escaping the environment's code, a raising reward function (see
:mod:`~evalkit.verifiers_compat.legacy.reward_errors`) or a raising rubric each become the row's ``error``, recorded
with its kind where it is read (verifiers' ``ModelError``: ``model``; a raising reward function: ``reward``;
the rest: ``environment``). The rollout itself is :meth:`evalkit.envs.base.Environment.rollout`; this class
implements its hooks (``new_state``, ``sampling_for``, ``generate``, ``score_rollout``, ``score_group``). A rollout
with an error is not scored on its own (reward 0, no metrics); in a group-scored rubric it still takes part in
the group call, as in verifiers, and then gets reward 0.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from evalkit.clients.base import ModelClient
from evalkit.core.errors import ENVIRONMENT, MODEL, REWARD, TIMEOUT, UserError
from evalkit.core.types import Completion, ExampleId, Message, RolloutState, SamplingArgs
from evalkit.envs.base import Environment
from evalkit.envs.tool_descriptions import TOOL_DESCRIPTIONS
from evalkit.verifiers_compat import signature_cache
from evalkit.verifiers_compat.convert import to_openai_messages, to_sampling_args, to_vf_sampling
from evalkit.verifiers_compat.legacy.bridge import ModelClientBridge
from evalkit.verifiers_compat.legacy.env_group import leaf_envs, routed_env
from evalkit.verifiers_compat.legacy.reward_errors import record_reward_errors, reward_errors

PENDING_GROUP_SCORE = "primekit_pending_group_score"
_VF_INPUT = "primekit_vf_input"


def is_legacy_environment(obj: Any) -> bool:
    """Whether ``obj`` is a legacy ``verifiers`` Environment (imports verifiers, which the caller has)."""
    from verifiers.legacy.envs.environment import Environment as VfEnvironment

    return isinstance(obj, VfEnvironment)


class VerifiersEnvironment(Environment):
    """A primekit Environment whose rows and rollouts come from a legacy verifiers environment."""

    def __init__(self, vf_env: Any, *, env_id: str = "", env_args: dict[str, Any] | None = None):
        # The base __init__ validates primekit datasets; this environment's data lives in verifiers.
        self.vf_env = vf_env
        self.env_id = env_id or getattr(vf_env, "env_id", "") or ""
        if not getattr(vf_env, "env_id", None):
            vf_env.env_id = self.env_id
        if env_args and not getattr(vf_env, "env_args", None):
            vf_env.env_args = dict(env_args)
        self.system_prompt = vf_env.system_prompt
        self._descriptions: dict[str, str] = {}
        """Tool descriptions set for the whole run (``--tools-file``), by tool name."""
        self.sampling_args = to_sampling_args(vf_env.sampling_args)
        self.group_scored = any(bool(leaf.requires_group_rollouts) for leaf in leaf_envs(vf_env))
        self.pass_threshold = float(getattr(vf_env, "pass_threshold", 0.5))
        self.parser = vf_env.parser
        self.rubric = vf_env.rubric
        for leaf in leaf_envs(vf_env):
            record_reward_errors(leaf.rubric)
        signature_cache.install()

    # ----- data -----------------------------------------------------------------------------
    @property
    def dataset(self) -> Any:
        """verifiers' training dataset (built on first use; None when the environment has only an eval split)."""
        return self._build("dataset", self.vf_env.build_dataset)

    @property
    def eval_dataset(self) -> Any:
        return self._build("eval_dataset", self.vf_env.build_eval_dataset)

    def _data(self, split: str) -> Any:
        """What ``get_dataset``/``get_eval_dataset`` read: verifiers' own split (a ``datasets.Dataset``)."""
        return self.dataset if split == "dataset" else self.eval_dataset

    def format_prompt(self, row: dict[str, Any], system_prompt: str | None = None) -> list[Message]:
        """The row's prompt as verifiers built it (its ``system_prompt`` and ``few_shot`` already applied, so
        ``system_prompt=""`` adds no message here either); a system prompt given for the run (GEPA,
        ``--system-prompt``) replaces the leading system message, or goes first when there is none.

        A completion-mode row (``message_type="completion"``) holds text: it is one ``text`` message, which
        verifiers itself turns the text into (``normalize_messages``) and its chat client sends as a user turn.
        """
        prompt = row.get("prompt")
        if isinstance(prompt, str):
            messages: list[Message] = [{"role": "text", "content": prompt}]
        else:
            messages = [dict(m) for m in prompt or []]
        if system_prompt is None:
            return messages
        if messages and messages[0].get("role") == "system":
            return [{"role": "system", "content": system_prompt}, *messages[1:]]
        return [{"role": "system", "content": system_prompt}, *messages] if system_prompt else messages

    def _build(self, split: str, build: Any) -> Any:
        try:
            return build()
        except Exception as exc:  # a dataset builder is user code, run late
            raise UserError(f"the {split} of verifiers environment '{self.env_id}' failed to build: "
                            f"{type(exc).__name__}: {exc}") from exc

    # ----- tool descriptions (GEPA's ``tools`` component, ``--tools-file``) -------------------------
    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        """The environment's tools (verifiers' ``tool_defs``) as OpenAI tool schemas, with the run's descriptions:
        what :mod:`evalkit.envs.tool_descriptions` reads and replaces. Empty for an ``EnvGroup`` (its members'
        tools differ by row, so there is no one set to describe)."""
        return [{"type": "function", "function": {"name": tool.name, "parameters": tool.parameters,
                                                  "description": self._descriptions.get(tool.name, tool.description)}}
                for tool in self._tool_defs()]

    @tool_schemas.setter
    def tool_schemas(self, schemas: list[dict[str, Any]]) -> None:
        self._descriptions = {s["function"]["name"]: str(s["function"].get("description") or "") for s in schemas}

    def _tool_defs(self) -> list[Any]:
        return [tool for tool in getattr(self.vf_env, "tool_defs", None) or [] if hasattr(tool, "model_copy")]

    def _described_input(self, vf_input: dict[str, Any]) -> dict[str, Any]:
        """``vf_input`` with the run's or the GEPA candidate's tool descriptions in ``info["tool_defs"]``, which
        verifiers' ``init_state`` prefers to the environment's own tools (unchanged when none are set)."""
        descriptions = {**self._descriptions, **(TOOL_DESCRIPTIONS.get() or {})}
        info = vf_input.get("info")
        if not descriptions or not self._tool_defs() or not isinstance(info if info is not None else {}, dict):
            return vf_input
        tools = [tool.model_copy(update={"description": descriptions[tool.name]}) if tool.name in descriptions else tool
                 for tool in self._tool_defs()]
        return {**vf_input, "info": {**(info or {}), "tool_defs": tools}}

    def task_ids(self, rows: list[dict[str, Any]], ids: list[int]) -> list[ExampleId]:
        """Each row's task's own ``example_id`` where its ``info`` carries a task payload with one (what verifiers
        writes), else its index; all indices when two rows would share an id (rows are keyed by it)."""
        own = [_task_id(task_payload(row)) for row in rows]
        chosen = [eid if eid is not None else index for eid, index in zip(own, ids)]
        return chosen if len(set(chosen)) == len(chosen) else list(ids)

    # ----- rollout hooks (the skeleton is Environment.rollout) ---------------------------------
    def new_state(self, row: dict[str, Any], example_id: ExampleId, rollout_idx: int,
                  system_prompt: str | None) -> RolloutState:
        """The opening state, holding verifiers' input (the row, with the prompt primekit formatted) for ``generate``;
        a task payload's ``answer`` and ``info`` are the row's, as verifiers reads them."""
        state = super().new_state(row, example_id, rollout_idx, system_prompt)
        state.extra[_VF_INPUT] = self._described_input(rollout_input(row, state.prompt, example_id))
        payload = task_payload(row)
        if payload is not None:
            state.answer = "" if payload.get("answer") is None else str(payload["answer"])
            info = payload.get("info")
            state.info = dict(info) if isinstance(info, dict) else {}
        return state

    def sampling_for(self, sampling: SamplingArgs | None) -> SamplingArgs:
        """The run's sampling alone: ``generate`` merges it into the environment's own the way verifiers does."""
        return SamplingArgs().merged(sampling)

    async def generate(self, client: ModelClient, state: RolloutState, sampling: SamplingArgs) -> None:
        """verifiers' own rollout through the bridge; an error verifiers recorded is recorded here with its kind.

        An exception escaping verifiers' code propagates to the skeleton (kind ``environment``).
        """
        vf_input = state.extra.pop(_VF_INPUT)
        bridge = ModelClientBridge(client)
        vf_sampling = to_vf_sampling(self.vf_env.sampling_args, sampling)
        vf_state = await self.vf_env.rollout(vf_input, bridge, client.model, vf_sampling)
        _copy_rollout(vf_state, bridge, state)
        state.extra = vf_state
        if self.group_scored:
            vf_state[PENDING_GROUP_SCORE] = True

    async def score_rollout(self, state: RolloutState, timeout: float | None) -> None:
        """verifiers' scoring of this rollout alone, within ``timeout`` (past it: kind ``timeout``); a rollout
        waiting for its group's scoring is left to :meth:`score_group` (which has no timeout;
        :func:`evalkit.eval.rollouts.run_groups` calls it, and a caller running single rollouts itself must too)."""
        if state.extra.get(PENDING_GROUP_SCORE):
            return
        try:
            async with asyncio.timeout(timeout):
                await self._score([state])
        except TimeoutError:
            state.reward, state.metrics, state.stop_condition = 0.0, {}, state.stop_condition or "error"
            state.record_error(
                TIMEOUT, f"scoring timed out after {timeout:g} s (raise --score-timeout if it needs longer)"
            )

    def set_kwargs(self, **kwargs: Any) -> None:
        """vf-eval's ``-x/--extra-env-kwargs``: verifiers' own ``set_kwargs`` on the wrapped environment."""
        self.vf_env.set_kwargs(**kwargs)

    def set_independent_scoring(self, value: bool) -> None:
        """vf-eval's ``-i``: score each rollout alone as soon as it finishes, never waiting for its group."""
        self.group_scored = self.group_scored and not value

    async def score_group(self, states: list[RolloutState]) -> None:
        """Score a finished group with verifiers' group scoring (only rubrics with group-level functions wait for
        it)."""
        pending = [s for s in states if _vf_state(s) is not None and s.extra.pop(PENDING_GROUP_SCORE, False)]
        if not pending:
            return
        started = time.perf_counter()
        await self._score(pending)
        elapsed_ms = round((time.perf_counter() - started) * 1000, 3)
        for state in pending:
            state.timing["scoring_ms"] = round(state.timing.get("scoring_ms", 0.0) + elapsed_ms, 3)
            state.timing["total_ms"] = round(state.timing.get("total_ms", 0.0) + elapsed_ms, 3)

    async def _score(self, states: list[RolloutState]) -> None:
        """verifiers' ``score_group`` over the states that have a verifiers state, by the environment that ran
        them (an EnvGroup's sub-environment, see :mod:`~evalkit.verifiers_compat.legacy.env_group`), then cleanup;
        errors become rows."""
        scorable = [s for s in states if _vf_state(s) is not None and (self.group_scored or s.error is None)]
        by_env: dict[int, tuple[Any, list[RolloutState]]] = {}
        for state in scorable:
            env = routed_env(self.vf_env, _vf_state(state))
            by_env.setdefault(id(env), (env, []))[1].append(state)
        failures: dict[int, str] = {}
        for env, group in by_env.values():
            vf_states = [_vf_state(s) for s in group]
            try:
                if env.score_rollouts:
                    await env.rubric.score_group(vf_states)
                else:
                    await env.rubric.dummy_score_group(vf_states)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a broken rubric fails these rows, not the run
                failures.update({id(s): f"rubric raised {type(exc).__name__}: {exc}" for s in group})
        for state in states:
            await self._finish(state, failures.get(id(state)))

    async def _finish(self, state: RolloutState, failure: str | None) -> None:
        """Reward, metrics and error of one row once scoring is over (see the module docstring's error rules)."""
        vf_state = _vf_state(state)
        problems: list[str] = []
        if vf_state is not None:
            problems.extend(reward_errors(vf_state))
            try:
                await routed_env(self.vf_env, vf_state).rubric.cleanup(vf_state)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                problems.append(f"rubric cleanup raised {type(exc).__name__}: {exc}")
        if failure is not None:  # the rubric itself is environment code
            state.record_error(ENVIRONMENT, failure)
        if vf_state is None or not state.scored:
            if problems:
                state.record_error(REWARD, "; ".join(problems))
            state.reward, state.metrics = 0.0, {}
            state.stop_condition = state.stop_condition or "error"
            return
        state.reward = float(vf_state.get("reward") or 0.0)
        state.metrics = {k: float(v) for k, v in (vf_state.get("metrics") or {}).items() if isinstance(v, (int, float))}
        if problems:  # like a native rubric: the failing function scored 0 and the row says why
            state.record_error(REWARD, "; ".join(problems))


ROLLOUT_INPUT_KEYS = ("answer", "info")
"""The row keys verifiers' ``RolloutInput`` declares besides ``prompt`` and ``example_id``."""


def task_payload(row: dict[str, Any]) -> dict[str, Any] | None:
    """The task payload a row's ``info`` carries (``info["task"]``, an object or its JSON), read by verifiers' own
    reader; None when there is none or verifiers cannot read it (then its rollout fails and says why)."""
    from verifiers.legacy.types import task_payload_from_info

    try:
        return task_payload_from_info(row.get("info"))
    except (TypeError, ValueError):
        return None


def _task_id(payload: dict[str, Any] | None) -> ExampleId | None:
    """A payload's own ``example_id`` when it is one primekit can key rows by (a whole number or non-empty text)."""
    eid = (payload or {}).get("example_id")
    if isinstance(eid, bool) or not isinstance(eid, (int, str)) or eid == "" or (isinstance(eid, int) and eid < 0):
        return None
    return eid


def rollout_input(row: dict[str, Any], prompt: list[Message], example_id: ExampleId) -> dict[str, Any]:
    """verifiers' input for one rollout of ``row``, as ``vf-eval`` delivers it: its env server receives the
    row as a ``RolloutInput`` (``prompt``, ``example_id``, ``answer``, ``info``), and serializing that drops
    every other column. So a dataset's extra columns (a plain-string ``task`` naming the dataset, the raw
    ``question``) never reach verifiers' ``rollout`` there; passed on, a string ``task`` fails every rollout
    (verifiers reads a row's ``task`` as a serialized task payload)."""
    extra = {key: row[key] for key in ROLLOUT_INPUT_KEYS if key in row}
    return {"prompt": prompt, "example_id": example_id, **extra}


def _vf_state(state: RolloutState) -> Any:
    """The verifiers State a rollout carries in ``extra`` (None when verifiers never returned one)."""
    return state.extra if "trajectory" in state.extra else None


def _copy_rollout(vf_state: Any, bridge: Any, state: RolloutState) -> None:
    """The verifiers state's conversation, turns, stop condition and errors onto primekit's RolloutState.

    The prompt is verifiers' ``state["prompt"]`` as the rollout left it (a ``setup_state`` that prepends a
    system message rewrites what was sent, and verifiers records that), completion-mode ``text`` kept."""
    if vf_state.get("prompt") is not None:
        state.prompt = to_openai_messages(vf_state["prompt"], keep_text_role=True)
    state.completion = to_openai_messages(vf_state.get("completion"))
    trajectory = vf_state.get("trajectory") or []
    state.turns = len(trajectory)
    state.responses = [_completion(step, bridge) for step in trajectory]
    state.stop_condition = vf_state.get("stop_condition")
    state.is_truncated = bool(vf_state.get("is_truncated")) or any(r.finish_reason == "length" for r in state.responses)
    error = vf_state.get("error")
    if error is not None:
        state.record_error(*_describe(error))


def _completion(step: Any, bridge: Any) -> Completion:
    """The primekit Completion of one trajectory step (the bridge's own, or rebuilt from verifiers' response)."""
    response = step.get("response")
    known = bridge.completion_for(getattr(response, "id", "")) if response is not None else None
    if known is not None:
        return known
    message = getattr(response, "message", None)
    return Completion(
        text=str(getattr(message, "content", "") or ""), finish_reason=getattr(message, "finish_reason", None) or "stop"
    )


def _describe(error: BaseException) -> tuple[str, str]:
    """The kind (verifiers' ``ModelError``: ``model``; any other: ``environment``) and message of an error verifiers
    recorded."""
    from verifiers.legacy.errors import ModelError

    cause = error.__cause__
    detail = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    if cause is not None and str(cause) and str(cause) not in detail:
        detail += f" ({type(cause).__name__}: {cause})"
    if isinstance(error, ModelError):
        return MODEL, f"model call failed: {detail}"
    return ENVIRONMENT, f"environment raised {detail}"
