"""The gepa adapter: a candidate is ``{"system_prompt": ...}``, scored by the environments' rollouts.

Contract with the library (``gepa.core.adapter.GEPAAdapter``):

* ``evaluate(batch, candidate, capture_traces)`` runs one rollout per :class:`Example` through
  ``evalkit.eval.rollouts.run_groups`` on the job's event loop (concurrently, at most the run's
  ``max_concurrent`` at a time: one bound, ``config.slots()``, shared by every evaluation and environment)
  and returns per-example rewards. Every rollout is reserved on the :class:`RolloutBudget` first;
  an evaluation that does not fit raises :class:`BudgetExceeded` and runs nothing. gepa needs a
  score for every example, so a rollout that errored without a score (model, environment or
  scoring timeout; :mod:`evalkit.core.errors`) scores 0 there; it is counted in ``errors`` /
  ``errors_by_kind``, passed to ``on_rollouts``, and shown in the progress bar, ``gepa.log`` and
  ``metadata.json`` (``num_rollout_errors``), so a failing server is never read as a bad prompt.
* ``make_reflective_dataset`` gives the teacher, per example: query, completion, expected answer,
  reward, error and the chosen ``state_columns``.
* Proposals do not come from here: the adapter's ``propose_new_texts`` is ``None`` and the runner
  hands :class:`~gepa_cli.reflection.Proposer` to ``gepa.optimize`` as its
  ``custom_candidate_proposer`` (the library's extension point for custom proposals).
* On ``--resume`` the library re-evaluates the seed on the validation set before it loads its saved
  state, then throws that result away. ``replay_seed`` (the saved seed candidate and its validation
  scores) answers that one call without a rollout, so resuming costs nothing and the budget stays honest.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gepa.core.adapter import EvaluationBatch

from evalkit.clients.base import ModelClient
from evalkit.core.aio import LoopThread, Slots
from evalkit.core.defaults import RolloutLimits
from evalkit.core.types import RolloutState, SamplingArgs
from evalkit.envs.base import Environment
from evalkit.envs.tool_descriptions import TOOL_DESCRIPTIONS
from evalkit.eval.rollouts import run_groups
from evalkit.vocabulary import ConcurrencyFields
from gepa_cli.budget import RolloutBudget
from gepa_cli.data import Example

COMPONENT = "system_prompt"
TOOLS = "tools"
"""The tool-descriptions component (:mod:`gepa_cli.components`): a JSON object ``{tool name: description}``."""


class SystemPromptAdapter:
    """Scores system prompts on environment rollouts and tells the teacher what happened."""

    propose_new_texts = None
    """gepa's protocol attribute; ``None`` because proposals come through ``custom_candidate_proposer``."""

    def __init__(
        self,
        envs: list[Environment],
        client: ModelClient,
        loop: LoopThread,
        budget: RolloutBudget,
        *,
        sampling: SamplingArgs | None = None,
        bound: Slots | None = None,
        limits: RolloutLimits = RolloutLimits(),
        state_columns: Sequence[str] = (),
        on_rollouts: Callable[[int, float, list[RolloutState]], None] | None = None,
        replay_seed: tuple[dict[str, str], dict[int, float]] | None = None,
        reveal: Callable[[str], str] = str,
    ):
        self.envs = envs
        self.client = client
        self.loop = loop
        self.budget = budget
        self.sampling = sampling
        self.bound = bound or ConcurrencyFields().slots()
        """The run's one bound on rollouts in flight (:meth:`evalkit.vocabulary.ConcurrencyFields.slots`)."""
        self.limits = limits
        self.state_columns = list(state_columns)
        self.on_rollouts = on_rollouts
        self._replay_seed = replay_seed
        self.reveal = reveal
        """The candidate text as rollouts run it (:meth:`gepa_cli.secret_mask.SecretMask.reveal`)."""
        self.errors = 0
        """Rollouts of this invocation that ended with an error (any kind)."""
        self.errors_by_kind: dict[str, int] = {}
        self.discovered_at_calls: dict[int, int] = {}
        """Candidate index -> rollouts spent when its validation pass finished (persisted in gepa's state)."""

    # gepa snapshots this into its state file before each save and hands it back on resume
    def get_adapter_state(self) -> dict[str, Any]:
        return {"discovered_at_calls": dict(self.discovered_at_calls)}

    def set_adapter_state(self, saved: dict[str, Any] | None) -> None:
        found = (saved or {}).get("discovered_at_calls", {})
        self.discovered_at_calls.update({int(k): int(v) for k, v in found.items()})

    def evaluate(
        self, batch: list[Example], candidate: dict[str, str], capture_traces: bool = False
    ) -> EvaluationBatch[RolloutState, dict[str, Any]]:
        replayed = self._replay(batch, candidate)
        if replayed is not None:
            return replayed
        return self.batch_evaluate([(candidate, batch)], capture_traces)[0]

    def batch_evaluate(
        self, items: list[tuple[dict[str, str], list[Example]]], capture_traces: bool = True
    ) -> list[EvaluationBatch[RolloutState, dict[str, Any]]]:
        """gepa's batched form (several proposals' or candidates' evaluations in one call): every
        rollout of every item is reserved first, then all run concurrently under the run's one bound."""
        self.budget.reserve(sum(len(batch) for _, batch in items))
        bound = self.bound

        async def all_items() -> list[list[RolloutState]]:
            return list(await asyncio.gather(*(self._rollouts(batch, candidate, bound) for candidate, batch in items)))

        return [
            self._scored(batch, states, capture_traces) for (_, batch), states in zip(items, self.loop.run(all_items()))
        ]

    def _scored(self, batch: list[Example], states: list[RolloutState], capture_traces: bool) -> EvaluationBatch:
        """One item's rollouts as gepa's evaluation: scores (errors score 0, counted), outputs, and one
        objective per reward function (``frontier_type`` objective/hybrid/cartesian) beside the reward."""
        scores = [float(state.reward) if state.scored else 0.0 for state in states]
        errored = [state for state in states if state.error]
        self.errors += len(errored)
        for state in errored:
            kind = state.kind_of_error or "environment"
            self.errors_by_kind[kind] = self.errors_by_kind.get(kind, 0) + 1
        if self.on_rollouts is not None:
            self.on_rollouts(len(states), sum(scores), errored)
        outputs = [
            {
                "example_id": ex.uid,
                "env": ex.env_id,
                "completion": _last_text(state),
                "reward": state.reward,
                "error": state.error,
                "error_kind": state.kind_of_error,
            }
            for ex, state in zip(batch, states)
        ]
        objectives = [{**_finite(state.metrics), "reward": score} for score, state in zip(scores, states)]
        return EvaluationBatch(
            outputs=outputs,
            scores=scores,
            trajectories=states if capture_traces else None,
            objective_scores=objectives,
            num_metric_calls=len(batch),
        )

    async def _rollouts(self, batch: list[Example], candidate: dict[str, str], bound: Slots) -> list[RolloutState]:
        """One ``run_groups`` per environment in the batch, all concurrent under the shared ``bound``,
        results in batch order. The candidate's tool descriptions (if it has them) hold for the rollouts
        started here: this runs as its own task, so setting them touches no other candidate's rollouts."""
        system_prompt = self.reveal(candidate[COMPONENT])
        if TOOLS in candidate:
            TOOL_DESCRIPTIONS.set(json.loads(candidate[TOOLS]))
        by_env: dict[int, list[int]] = {}
        for position, example in enumerate(batch):
            by_env.setdefault(example.env_idx, []).append(position)

        async def one_env(env_idx: int, positions: list[int]) -> list[list[RolloutState]]:
            own = candidate.get(
                f"{COMPONENT}:{batch[positions[0]].env_id}"
            )  # the environment's own prompt, if optimized
            return await run_groups(
                self.envs[env_idx],
                self.client,
                [batch[p].row for p in positions],
                example_ids=[batch[p].row_idx for p in positions],
                sampling=self.sampling,
                bound=bound,
                system_prompt=system_prompt if own is None else self.reveal(own),
                limits=self.limits,
            )

        groups = await asyncio.gather(*(one_env(idx, pos) for idx, pos in by_env.items()))
        states: list[RolloutState | None] = [None] * len(batch)
        for positions, env_groups in zip(by_env.values(), groups):
            for position, group in zip(positions, env_groups):
                states[position] = group[0]
        return [s for s in states if s is not None]

    def _replay(self, batch: list[Example], candidate: dict[str, str]) -> EvaluationBatch | None:
        if self._replay_seed is None:
            return None
        seed, scores = self._replay_seed
        if candidate != seed or any(ex.split != "val" or ex.uid not in scores for ex in batch):
            return None
        self._replay_seed = None  # answered once: the library asks this only at the start
        return EvaluationBatch(
            outputs=[{"example_id": ex.uid, "replayed": True} for ex in batch],
            scores=[float(scores[ex.uid]) for ex in batch],
            trajectories=None,
            num_metric_calls=0,
        )

    def make_reflective_dataset(
        self,
        candidate: dict[str, str],
        eval_batch: EvaluationBatch[RolloutState, dict[str, Any]],
        components_to_update: list[str],
    ) -> dict[str, list[dict[str, Any]]]:
        records = [self._record(state) for state in (eval_batch.trajectories or [])]
        envs = [output.get("env") for output in eval_batch.outputs]
        # an environment's own prompt (system_prompt:<env>) is shown only that environment's examples
        return {name: records if not name.startswith(f"{COMPONENT}:")
                else [record for record, env in zip(records, envs) if name == f"{COMPONENT}:{env}"]
                for name in components_to_update}

    def _record(self, state: RolloutState) -> dict[str, Any]:
        user_turns = [m for m in state.prompt if m.get("role") != "system"]
        record: dict[str, Any] = {
            "query": _render_messages(user_turns),
            "completion": _render_messages(state.completion) or "(empty)",
            "expected_answer": state.answer or "(none given)",
            "reward": round(float(state.reward), 4),
        }
        if state.error:
            record["error"] = state.error
        for column in self.state_columns:
            record[column] = state.extra.get(column)
        return record


def _finite(metrics: Mapping[str, Any]) -> dict[str, float]:
    """A rollout's per-function rewards that are finite numbers (an objective must be comparable)."""
    return {str(k): float(v) for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


def _last_text(state: RolloutState) -> str:
    for message in reversed(state.completion):
        if message.get("role") == "assistant":
            return str(message.get("content") or "")
    return ""


def _render_messages(messages: Sequence[Mapping[str, Any]]) -> str:
    """Single-turn: the text alone; multi-turn: ``role: text`` lines, so the teacher sees the dialogue."""
    if len(messages) == 1:
        return str(messages[0].get("content") or "")
    return "\n".join(f"{m.get('role')}: {m.get('content') or ''}" for m in messages)
