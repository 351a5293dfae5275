"""The environment contract: a dataset of examples, how a rollout talks to the model, how it is scored.

Shape follows the verifiers convention so environments port with renames only::

    def load_environment(**env_args) -> Environment:
        return SingleTurnEnv(dataset=rows, system_prompt="...", parser=..., rubric=Rubric([...]))

Dataset rows hold ``prompt`` (a list of chat messages) or ``question`` (a string), optional ``answer``
(a string) and ``info`` (a dict). ``dataset`` is for training (RL, GEPA's train split),
``eval_dataset`` for evaluation; an environment with only one uses it for both. Either may be a
*dataset builder*: a function of no arguments returning the rows, called the first time that split is
used (as in verifiers, so an eval never builds the training split). ``few_shot`` messages go between
the system prompt and the question of ``question`` rows (rows that bring their own ``prompt`` are
used as they are, as verifiers does).

``rollout`` is the one entry point callers use (eval runner, GEPA, RL), and the one rollout skeleton:
native environments and the verifiers wrappers (:mod:`evalkit.verifiers_compat`) differ only in the
hooks it calls, in this order:

1. ``new_state(row, example_id, rollout_idx, system_prompt)``: the opening :class:`RolloutState`
   (prompt from :meth:`format_prompt`); a wrapper may keep what its library needs in ``state.extra``.
2. ``sampling_for(sampling)``: the sampling ``generate`` gets (default: the environment's
   ``sampling_args`` under the run's; a library that merges itself gets the run's alone).
3. ``generate(client, state, sampling)``: the conversation. Appends ``completion`` / ``responses``,
   sets ``turns``, ``stop_condition`` and ``is_truncated``. It may raise: a
   :class:`~evalkit.core.errors.ModelCallError` is recorded as kind ``model``, anything else as
   ``environment``. A wrapper whose library records failures itself records each with its kind
   (``state.record_error``) where it reads it.
4. ``score_rollout(state, timeout)``: called for every rollout, errored ones included; sets
   ``reward`` / ``metrics`` and records ``reward`` / ``timeout`` errors, within ``timeout`` seconds
   (``None``: no limit). The default scores with ``rubric`` only a rollout without error.
5. ``score_group(states)``: :func:`evalkit.eval.rollouts.run_groups` calls it once per finished group
   (a no-op here; group-level verifiers rubrics score there).

Two lifecycle hooks around the rollouts, both doing nothing here: ``serving()`` is held by
:func:`evalkit.eval.rollouts.run_groups` while its groups run (verifiers v1 tasksets bring up their shared tool
servers there), and ``run_files(run_dir, kept)`` gives the eval runner a writer of the environment's own
files beside ``results.jsonl`` (verifiers v1: verifiers' ``traces.jsonl``).

The skeleton owns the rest: token usage (summed over ``responses``), ``timing``, recording what
``generate`` raised, and the rule that a rollout whose conversation failed is not scored (reward 0,
``stop_condition`` ``error`` unless the conversation named one). It never raises for problems
*inside* a rollout; errors end up in ``state.error`` with their kind in ``state.error_kind``
(``model``, ``environment``, ``reward``, ``timeout``; see :mod:`evalkit.core.errors`). A raising reward
function scores 0 for that function only. Native subclasses implement ``generate`` and nothing else.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from contextlib import AbstractAsyncContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from evalkit.clients.base import ModelClient
from evalkit.core.aio import USER_EXITS, ExitRequested
from evalkit.core.defaults import RolloutLimits
from evalkit.core.errors import ENVIRONMENT, MODEL, TIMEOUT, ModelCallError, UserError
from evalkit.core.types import ExampleId, Message, RolloutState, SamplingArgs
from evalkit.core.untrusted import cap_message
from evalkit.envs.parsers import Parser
from evalkit.envs.rows import column_names, plain_rows, selection_order, take_rows
from evalkit.envs.rubric import Rubric

if TYPE_CHECKING:
    from datasets import Dataset

DatasetLike = "Dataset | Iterable[dict[str, Any]] | Callable[[], Any] | None"
Split = "Dataset | list[dict[str, Any]]"
"""A built split: a ``datasets.Dataset``, or plain rows that ``datasets`` would return unchanged
(:mod:`evalkit.envs.rows`; ``datasets`` is then imported only if the ``dataset`` property is read)."""


class RunFiles(Protocol):
    """An environment's own files in an eval run dir (see :meth:`Environment.run_files`)."""

    def write_group(self, states: list[RolloutState]) -> None:
        """Append what the environment keeps of these finished rollouts; an ``OSError`` propagates."""


def to_dataset(data: DatasetLike, what: str = "dataset") -> Dataset | None:
    """Accept a ``datasets.Dataset`` or a list of dict rows; check each row can become a prompt."""
    split = _to_split(data, what)
    return _as_dataset(split) if split is not None else None


def _to_split(data: Any, what: str) -> Split | None:
    """Plain rows when ``datasets`` would return them unchanged, else a ``Dataset``; checked like :func:`to_dataset`."""
    if data is None:
        return None
    rows = plain_rows(data)
    if rows is not None:
        columns = set(column_names(rows))
        split: Any = rows
    else:
        from datasets import Dataset

        split = data if isinstance(data, Dataset) else Dataset.from_list(list(data))
        columns = set(split.column_names)
    if "prompt" not in columns and "question" not in columns:
        raise UserError(f"{what} rows need a 'prompt' (messages) or 'question' (text) column; got {sorted(columns)}")
    return split


def _as_dataset(split: Split) -> Dataset:
    if isinstance(split, list):
        from datasets import Dataset

        return Dataset.from_list(split)
    return split


class Environment:
    """Base class: data, system prompt, parser, rubric, default sampling; subclasses define ``generate``."""

    pass_threshold: float | None = None
    """The reward at or above which a rollout passes (pass@k), when the environment brings its own (verifiers'
    ``Environment.pass_threshold``, 0.5 by default); ``None``: the run's ``pass_threshold`` (1.0)."""

    infinite: bool = False
    """Whether the training split never ends (a verifiers v1 taskset that yields tasks forever):
    ``get_dataset(-1)`` then refuses, and callers draw a bounded ``get_dataset(n)`` instead."""

    def __init__(
        self,
        dataset: DatasetLike = None,
        eval_dataset: DatasetLike = None,
        system_prompt: str | None = None,
        parser: Parser | None = None,
        rubric: Rubric | None = None,
        sampling_args: dict[str, Any] | None = None,
        env_id: str = "",
        few_shot: list[Message] | None = None,
    ):
        if dataset is None and eval_dataset is None:
            raise UserError("an environment needs a dataset or an eval_dataset")
        self._sources = {"dataset": dataset, "eval_dataset": eval_dataset}
        self._built: dict[str, Split | None] = {}
        self._as_datasets: dict[str, Dataset] = {}
        for split, source in self._sources.items():
            if not callable(source):
                self._built[split] = _to_split(source, split)
        self.system_prompt = system_prompt
        self.few_shot = [dict(m) for m in few_shot] if few_shot else None
        self.parser = parser or (rubric.parser if rubric else Parser())
        self.rubric = rubric or Rubric(parser=self.parser)
        if rubric is not None and parser is not None:
            self.rubric.parser = parser
        self.sampling_args = SamplingArgs.from_dict(sampling_args)
        self.env_id = env_id

    # ----- data -----------------------------------------------------------------------------
    @property
    def dataset(self) -> Dataset | None:
        """The training split (a builder function is called on first use)."""
        return self._split("dataset")

    @dataset.setter
    def dataset(self, value: DatasetLike) -> None:
        self._sources["dataset"] = value
        self._built.pop("dataset", None)
        self._as_datasets.pop("dataset", None)

    @property
    def eval_dataset(self) -> Dataset | None:
        """The evaluation split (a builder function is called on first use)."""
        return self._split("eval_dataset")

    @eval_dataset.setter
    def eval_dataset(self, value: DatasetLike) -> None:
        self._sources["eval_dataset"] = value
        self._built.pop("eval_dataset", None)
        self._as_datasets.pop("eval_dataset", None)

    def _split(self, split: str) -> Dataset | None:
        """The split as a ``datasets.Dataset`` (what the properties promise)."""
        data = self._data(split)
        if data is None:
            return None
        if split not in self._as_datasets:
            self._as_datasets[split] = _as_dataset(data)
        return self._as_datasets[split]

    def _data(self, split: str) -> Split | None:
        """The split as built: plain rows or a Dataset (a builder function is called on first use)."""
        if split not in self._built:
            source = self._sources.get(split)
            try:
                data = source() if callable(source) else source
            except Exception as exc:  # user code, run late: still one clear line, not a traceback
                raise UserError(
                    f"the {split} builder of environment '{self.env_id}' raised {type(exc).__name__}: {exc}"
                ) from exc
            self._built[split] = _to_split(data, split)
        return self._built[split]

    def get_dataset(self, n: int = -1, seed: int = 0, shuffle: bool = False) -> list[dict[str, Any]]:
        """Training rows (falls back to the eval split), as plain dicts, at most ``n`` (-1 = all)."""
        data = self._data("dataset")
        return _take(data if data is not None else self._data("eval_dataset"), n, seed, shuffle)

    def get_eval_dataset(self, n: int = -1, seed: int = 0, shuffle: bool = False) -> list[dict[str, Any]]:
        """Evaluation rows (falls back to the training split), as plain dicts."""
        data = self._data("eval_dataset")
        return _take(data if data is not None else self._data("dataset"), n, seed, shuffle)

    def example_ids(self, rows: list[dict[str, Any]], seed: int, shuffle: bool, split: str = "eval") -> list[int]:
        """Each of ``rows`` (what ``get_eval_dataset``, or ``get_dataset`` for ``split="train"``, returned for
        ``seed``/``shuffle``) by its own index in its split, so an example keeps its id under ``--shuffle``
        (as verifiers' ``example_id`` column does): the rows' own int ``example_id`` when they all have one
        (verifiers adds it), else the row's position before the shuffle."""
        own = [row.get("example_id") for row in rows]
        if rows and all(type(v) is int for v in own) and len(set(own)) == len(own):
            return [int(v) for v in own]  # type: ignore[arg-type]
        if not shuffle:
            return list(range(len(rows)))
        first, second = ("dataset", "eval_dataset") if split == "train" else ("eval_dataset", "dataset")
        data = self._data(first)
        data = data if data is not None else self._data(second)
        return selection_order(len(data) if data is not None else 0, len(rows), seed, shuffle)

    def task_ids(self, rows: list[dict[str, Any]], ids: list[int]) -> list[ExampleId]:
        """Hook: the ids the rows of ``rows`` are written under, given their :meth:`example_ids`: those, unless the
        environment's framework writes a task's own id instead (a wrapped legacy verifiers environment does)."""
        return list(ids)

    def format_prompt(self, row: dict[str, Any], system_prompt: str | None = None) -> list[Message]:
        """The opening messages of a rollout; ``system_prompt`` (e.g. from GEPA) replaces the env's."""
        system = system_prompt if system_prompt is not None else self.system_prompt
        if row.get("prompt"):
            messages = [dict(m) for m in row["prompt"]]
            if system is not None:
                if messages and messages[0].get("role") == "system":
                    if system_prompt is not None:
                        messages[0] = {"role": "system", "content": system}
                else:
                    messages.insert(0, {"role": "system", "content": system})
            return messages
        messages = [{"role": "system", "content": system}] if system else []
        messages.extend(dict(m) for m in self.few_shot or [])
        messages.append({"role": "user", "content": str(row.get("question", ""))})
        return messages

    # ----- rollouts (the skeleton and its hooks; see the module docstring) -----------------
    def new_state(self, row: dict[str, Any], example_id: ExampleId, rollout_idx: int,
                  system_prompt: str | None) -> RolloutState:
        """Hook: the opening state of a rollout of ``row``."""
        info = row.get("info") or {}
        return RolloutState(
            example_id=example_id,
            rollout_idx=rollout_idx,
            prompt=self.format_prompt(row, system_prompt),
            answer="" if row.get("answer") is None else str(row.get("answer")),
            info=dict(info) if isinstance(info, dict) else {"value": info},
            task=str(row.get("task") or self.env_id),
        )

    def sampling_for(self, sampling: SamplingArgs | None) -> SamplingArgs:
        """Hook: the sampling ``generate`` gets: the environment's defaults, the run's values winning."""
        return self.sampling_args.merged(sampling)

    async def generate(self, client: ModelClient, state: RolloutState, sampling: SamplingArgs) -> None:
        """Hook: run the conversation (append to ``state.completion`` / ``state.responses``, set
        ``turns``, ``stop_condition``, ``is_truncated``).

        Raise freely; ``rollout`` records the error with its kind. Subclasses implement this.
        """
        raise NotImplementedError

    async def score_rollout(self, state: RolloutState, timeout: float | None) -> None:
        """Hook: score one rollout whose conversation is over, within ``timeout`` seconds.

        Called for errored rollouts too; this one gives them 0 for every reward function and runs
        nothing. Must not raise for scoring failures: they are recorded (kind ``reward`` or ``timeout``).
        """
        if state.error is not None:
            state.metrics = {name: 0.0 for name in self.rubric.names}
            return
        score = await self.rubric.score(state, timeout)
        state.reward, state.metrics = score.reward, score.metrics
        if score.error_kind is not None:
            state.record_error(score.error_kind, "; ".join(score.errors))

    async def rollout(
        self,
        client: ModelClient,
        row: dict[str, Any],
        *,
        example_id: ExampleId = 0,
        rollout_idx: int = 0,
        sampling: SamplingArgs | None = None,
        system_prompt: str | None = None,
        limits: RolloutLimits = RolloutLimits(),
    ) -> RolloutState:
        """One full rollout: the conversation (within ``limits.rollout_timeout`` seconds, wall clock), then its
        score (within ``limits.score_timeout``); ``None``: no limit. Every message of the completion keeps at
        most ``limits.max_message_chars`` characters (:func:`evalkit.core.untrusted.cap_message`). Never raises
        for in-rollout failures (see the module docstring)."""
        state = self.new_state(row, example_id, rollout_idx, system_prompt)
        state.max_message_chars = limits.max_message_chars
        started = time.perf_counter()
        await _recorded(
            _within(limits.rollout_timeout, self.generate(client, state, self.sampling_for(sampling)), state), state
        )
        state.completion = [cap_message(message, limits.max_message_chars) for message in state.completion]
        generated = time.perf_counter()
        for response in state.responses:
            state.usage.add(response.usage)
        await _recorded(self.score_rollout(state, limits.score_timeout), state, "scoring")
        if not state.scored:
            state.reward = 0.0
            state.stop_condition = state.stop_condition or "error"
        finished = time.perf_counter()
        state.timing = {
            "generation_ms": round((generated - started) * 1000, 3),
            "scoring_ms": round((finished - generated) * 1000, 3),
            "total_ms": round((finished - started) * 1000, 3),
        }
        return state

    def serving(self) -> AbstractAsyncContextManager[Any]:
        """Hook: an async context held while a batch of rollouts runs (:func:`evalkit.eval.rollouts.run_groups`
        enters it around its groups); resources every rollout of the batch shares live inside it. Nothing here."""
        return nullcontext()

    def run_files(self, run_dir: Path, kept: set[tuple[ExampleId, int]]) -> RunFiles | None:
        """Hook: a writer of the environment's own files in an eval run dir, beside ``results.jsonl``, or None.

        ``kept`` holds the ``(example_id, rollout_idx)`` of the rows the run keeps (a resumed run's rows that
        do not run again); the writer drops what it holds for any other rollout, then gets every finished
        group (:meth:`RunFiles.write_group`) right before its rows are written. None here: no own files.
        """
        return None

    async def score_group(self, states: list[RolloutState]) -> None:
        """Called by :func:`evalkit.eval.rollouts.run_groups` once per group, after all its rollouts finished.

        Native environments score each rollout in :meth:`rollout`, so this does nothing. Environments whose
        rubric scores a whole group at once (wrapped verifiers environments with group-level reward
        functions) fill ``reward``/``metrics``/``error`` of ``states`` here; it must not raise for scoring
        failures (they become the rows' ``error``).
        """
        return None


async def _within(seconds: float | None, step: Awaitable[None], state: RolloutState) -> None:
    """Await the conversation for at most ``seconds``; past them it is cancelled and the rollout records
    an error of kind ``timeout`` (its messages so far are kept). A ``TimeoutError`` the environment
    raises itself is not this bound: it is left to :func:`_recorded`."""
    limit = asyncio.timeout(seconds)
    try:
        async with limit:
            await step
    except TimeoutError:
        if not limit.expired():
            raise
        turns = f"{state.turns} model turn{'' if state.turns == 1 else 's'}"
        state.record_error(TIMEOUT, f"rollout timed out after {seconds:g} s ({turns} done; the conversation: model "
                                    "calls, env_response, tools; raise --rollout-timeout if it needs longer)")


async def _recorded(step: Any, state: RolloutState, what: str = "environment") -> None:
    """Await a hook; what it raises is recorded on ``state`` with its kind (a bad rollout is data)."""
    try:
        await step
    except ModelCallError as exc:
        state.record_error(MODEL, f"model call failed: {exc}")
    except (Exception, *USER_EXITS) as exc:  # environment code is user code (sys.exit() in it included)
        if isinstance(exc, USER_EXITS):
            exc = ExitRequested.of(exc)
        state.record_error(ENVIRONMENT, f"{what} raised {type(exc).__name__}: {exc}")


def _take(dataset: Split | None, n: int, seed: int, shuffle: bool) -> list[dict[str, Any]]:
    if dataset is None:
        return []
    if isinstance(dataset, list):
        return take_rows(dataset, n, seed, shuffle)
    if shuffle:
        dataset = dataset.shuffle(seed=seed)
    if n is not None and n >= 0:
        dataset = dataset.select(range(min(n, len(dataset))))
    return dataset.to_list()


class SingleTurnEnv(Environment):
    """One model call per rollout: the prompt in, one assistant message out."""

    async def generate(self, client: ModelClient, state: RolloutState, sampling: SamplingArgs) -> None:
        response = await client.chat(state.prompt, sampling)
        state.responses.append(response)
        state.completion.append(response.to_message())
        state.turns = 1
        state.is_truncated = response.finish_reason == "length"
        state.stop_condition = "length" if state.is_truncated else "completed"
