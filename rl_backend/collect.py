"""Collecting one step's training batch: draw examples in a fixed order, roll out, filter, refill.

The data order is a pure function of ``(seed, cursor)`` (:class:`rl_backend.mixture.EnvMixture`);
a checkpoint stores the cursor after its step, so ``--resume`` continues with exactly the examples
the original run would have drawn. Sampling is reseeded per (step, round) for the same reason.
With several environments each example is rolled out and scored by its own environment; all of
them share one ``max_concurrent`` bound.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

from evalkit.core.aio import LoopThread
from evalkit.core.errors import UserError
from evalkit.core.types import Completion, RolloutState, SamplingArgs
from evalkit.eval.rollouts import run_groups
from rl_backend.algorithms import Algorithm, Trace
from rl_backend.config import RLConfig
from rl_backend.filtering import filter_groups
from rl_backend.mixture import EnvMixture
from rl_backend.policy import Sample
from rl_backend.teacher import TeacherError


@dataclass
class StepBatch:
    step: int
    kept: list[list[RolloutState]]
    generated: list[list[RolloutState]]
    rounds: int
    cursor_after: int
    gen_seconds: float
    gen_tokens: int
    weights_step: int
    """The trainer step whose weights generated this batch (``step - 1`` on-policy, ``step - 2`` one-step
    off-policy)."""
    advantages: dict[tuple[int, int], float] = field(default_factory=dict)
    env_of: dict[int, str] = field(default_factory=dict)
    """The environment label of each example id (the global cursor of the example)."""
    algo_state: dict[str, Any] = field(default_factory=dict)
    """Each environment's algorithm state once this batch's credit is assigned (what a checkpoint after it keeps)."""
    ref_logprobs: dict[tuple[int, int, int], list[float]] = field(default_factory=dict)
    """``(example id, rollout index, turn) ->`` the teacher's log-probability of each completion token: the rollouts
    of an ``opd`` environment, which train on the ``ref_kl`` component instead of an advantage."""
    imitated: set[tuple[int, int]] = field(default_factory=set)
    """``(example id, rollout index)`` of the rollouts a frozen teacher sampled (``sft``): their tokens feed the
    ``ce`` component at weight 1, no advantage."""
    echo_roles: dict[str, dict[str, float]] = field(default_factory=dict)
    hints: dict[tuple[int, int], str] = field(default_factory=dict)
    """``(example id, rollout index) ->`` the system message with the task's demonstration (``opsd``): the policy
    reading it before the sample is the reference of its ``ref_kl`` component."""
    """Each ``echo`` environment's ``alpha`` per role: the ``ce`` weight of its environment-provided tokens."""


class BatchCollector:
    """Rolls out training batches with the source's client on the run's event loop (``loop``).

    ``collect`` is called from a worker thread (generation overlaps training); its rollouts run on
    ``loop`` like every other coroutine of the run.
    """

    def __init__(self, config: RLConfig, mixture: EnvMixture, source: Any, loop: LoopThread):
        self.config = config
        self.mixture = mixture
        self.source = source
        self.loop = loop
        own = SamplingArgs.from_dict({**config.sampling.request_args(), "logprobs": True})
        self.sampling = source.sampling.merged(own)
        """The source's required settings (token ids, logprobs) with the config's sampling over them."""
        self.algorithms: dict[str, Algorithm] = {
            env.label: config.algo_of(env).build(config.trainer) for env in config.env}
        """One algorithm per environment (its own ``algo`` or the run's), keyed by its label."""
        self.teachers: dict[str, Any] = {}
        """The teacher of each ``opd`` environment (:mod:`rl_backend.teacher`), set once checked."""
        self.samplers: dict[str, Any] = {}
        """The frozen model that samples each ``sft`` environment's rollouts (:mod:`rl_backend.teacher_sampler`),
        set once checked; the other environments sample from the policy (``source``)."""

    def collect(self, step: int, cursor: int, weights_step: int) -> StepBatch:
        """Roll out groups until ``examples_per_step`` have reward variance or ``max_rounds`` are spent."""
        need = self.config.examples_per_step
        kept: list[list[RolloutState]] = []
        generated: list[list[RolloutState]] = []
        env_of: dict[int, str] = {}
        started = time.perf_counter()
        rounds = 0
        first = max(need, math.ceil(need * self.config.filter.oversampling_factor))
        while len(kept) < need and rounds < self.config.filter.max_rounds:
            ids = list(range(cursor, cursor + (first if rounds == 0 else need - len(kept))))
            cursor += len(ids)
            for sampler in [self.source, *self.samplers.values()]:
                sampler.reseed(self.config.seed * 7_919 + step * 101 + rounds)
            groups = self.loop.run(self._roll_out(ids, env_of))
            if self.config.trainer.zero_truncated_completions:
                _zero_truncated(groups)
            generated.extend(groups)
            kept.extend(filter_groups(groups, self.config.filter.enabled,
                                      signal_when_uniform=lambda g: self._own_baseline(g, env_of)).kept)
            rounds += 1
            if not self.config.filter.enabled:
                break
        batch = StepBatch(
            step=step,
            kept=kept[:need],
            generated=generated,
            rounds=rounds,
            cursor_after=cursor,
            gen_seconds=time.perf_counter() - started,
            gen_tokens=sum(s.usage.output_tokens for g in generated for s in g),
            weights_step=weights_step,
            env_of=env_of,
        )
        masked = self.config.trainer.mask_truncated_completions
        for group in batch.kept:
            scored = [s for s in group if s.scored]  # an errored rollout has no reward: no advantage, no samples
            algorithm = self._algorithm_of(group, env_of)
            if algorithm.name == "opsd":  # the demonstration-conditioned policy is the reference: no credit
                hint = self._hint(group[0].example_id, env_of)
                batch.hints.update(((s.example_id, s.rollout_idx), hint) for s in scored
                                   if not (masked and s.is_truncated))
                continue
            if algorithm.action_component == "ce":  # a teacher's tokens, imitated: no credit
                batch.imitated.update((s.example_id, s.rollout_idx) for s in scored
                                      if not (masked and s.is_truncated))
                continue
            credit = algorithm.credit([trace_of(s) for s in scored]) if scored else []
            for state, advantage in zip(scored, credit or []):
                if not (masked and state.is_truncated):  # still in the group's mean, out of the loss
                    batch.advantages[(state.example_id, state.rollout_idx)] = advantage
        self._score_with_teachers(batch)
        batch.algo_state = self.state_dict()
        batch.echo_roles = {label: dict(algorithm.roles) for label, algorithm in self.algorithms.items()
                            if algorithm.observation_component == "ce"}
        return batch

    def _score_with_teachers(self, batch: StepBatch) -> None:
        """The teacher's log-probabilities of every sampled token of the kept rollouts of ``ref_kl`` environments
        (errored and, with ``mask_truncated_completions``, truncated ones left out, as for advantages)."""
        masked = self.config.trainer.mask_truncated_completions
        for label, teacher in self.teachers.items():
            keys, pairs = [], []
            for group in batch.kept:
                if len(self.algorithms) > 1 and batch.env_of.get(group[0].example_id) != label:
                    continue
                for state in group:
                    if not state.scored or (masked and state.is_truncated):
                        continue
                    for turn, response in enumerate(state.responses):
                        checked = checked_sample(response, 0.0)
                        keys.append((state.example_id, state.rollout_idx, turn))
                        pairs.append((checked.prompt_ids, checked.completion_ids))
            try:
                scores = teacher.score_many(pairs)
            except TeacherError as exc:
                raise UserError(f"step {batch.step}: {exc}") from None
            batch.ref_logprobs.update(zip(keys, scores))

    def _hint(self, example_id: int, env_of: dict[int, str]) -> str:
        """``opsd``'s system message for an example: its environment's template holding the demonstration."""
        algo = self._algo_config(env_of.get(example_id))
        return algo.template.format(demonstration=demonstration(self.mixture.pick(example_id)[1], algo.demo_key,
                                                                env_of.get(example_id), example_id))

    def _algo_config(self, label: str | None) -> Any:
        env = next((e for e in self.config.env if e.label == label), self.config.env[0])
        return self.config.algo_of(env)

    def _algorithm_of(self, group: list[RolloutState], env_of: dict[int, str]) -> Algorithm:
        """The algorithm of the environment that rolled the group out."""
        if len(self.algorithms) == 1:
            return next(iter(self.algorithms.values()))
        return self.algorithms[env_of[group[0].example_id]]

    def _own_baseline(self, group: list[RolloutState], env_of: dict[int, str]) -> bool:
        """Whether the group's algorithm credits it against something other than its siblings (``rae``), so that
        equal rewards still carry signal and the difficulty filter keeps the group."""
        return not self._algorithm_of(group, env_of).group_relative

    def state_dict(self) -> dict[str, Any]:
        return {label: algorithm.state_dict() for label, algorithm in self.algorithms.items()
                if algorithm.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for label, algorithm_state in state.items():
            if label in self.algorithms:
                self.algorithms[label].load_state_dict(algorithm_state)

    def _sampler_of(self, label: str) -> Any:
        """Who samples an environment's rollouts: its ``sft`` teacher, else the policy's source."""
        return self.samplers.get(label, self.source)

    def _sampling_of(self, label: str) -> SamplingArgs:
        """The sampling settings of the run over what that sampler's requests need."""
        sampler = self.samplers.get(label)
        if sampler is None:
            return self.sampling
        return sampler.sampling.merged(SamplingArgs.from_dict(self.config.sampling.request_args()))

    async def _roll_out(self, ids: list[int], env_of: dict[int, str]) -> list[list[RolloutState]]:
        """The groups of examples ``ids`` in their order, each run by its own environment under one bound."""
        picks = [self.mixture.pick(i) for i in ids]
        for example_id, (k, row) in zip(ids, picks):  # opsd: every example has its demonstration, before rolling out
            algo = self._algo_config(self.mixture.members[k].name)
            if algo.type == "opsd":
                demonstration(row, algo.demo_key, self.mixture.members[k].name, example_id)
        bound = self.config.slots()
        positions: dict[int, list[int]] = {}
        for position, (k, _) in enumerate(picks):
            positions.setdefault(k, []).append(position)
        calls = [
            run_groups(
                self.mixture.members[k].env,
                self._sampler_of(self.mixture.members[k].name).client,
                [picks[p][1] for p in where],
                example_ids=[ids[p] for p in where],
                rollouts_per_example=self.config.rollouts_per_example,
                sampling=self._sampling_of(self.mixture.members[k].name),
                system_prompt=self.config.system_prompt,
                bound=bound,
                limits=self.config.limits(),
            )
            for k, where in positions.items()
        ]
        out: list[list[RolloutState]] = [[] for _ in ids]
        for (k, where), groups in zip(positions.items(), await asyncio.gather(*calls)):
            for position, group in zip(where, groups):
                out[position] = group
                env_of[ids[position]] = self.mixture.members[k].name
        return out


def demonstration(row: dict[str, Any], key: str, env: str | None, example_id: int) -> str:
    """``opsd``'s demonstration of an example: ``info[key]``, else the row's own ``key`` field (prime-rl's order);
    a UserError when neither holds text."""
    info = row.get("info")
    if isinstance(info, str):
        try:
            info = json.loads(info)
        except ValueError:
            info = None
    value = info.get(key) if isinstance(info, dict) else None
    if value is None:
        value = row.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise UserError(f"algo.type 'opsd' needs each example's demonstration in its info['{key}'] or its '{key}' "
                        f"field, and example {example_id} of environment '{env}' has none; set algo.demo_key to the "
                        "field that holds it (e.g. 'answer')")
    return value if isinstance(value, str) else json.dumps(value)


def trace_of(state: RolloutState) -> Trace:
    """What credit assignment reads of a scored rollout: its reward and sizes (the last turn's prompt is the
    context the model conditioned on, less what it generated itself)."""
    output = state.usage.output_tokens
    last = state.responses[-1] if state.responses else None
    context = len(last.prompt_token_ids) + len(last.completion_token_ids or []) if last and last.prompt_token_ids else 0
    return Trace(reward=float(state.reward), output_tokens=output, input_tokens=max(0, context - output),
                 turns=max(1, len(state.responses)))


def _zero_truncated(groups: list[list[RolloutState]]) -> None:
    """``zero_truncated_completions``: a rollout cut by ``max_tokens`` scores 0 (its own reward kept in metrics)."""
    for group in groups:
        for state in group:
            if state.is_truncated and state.scored:
                state.metrics["reward_before_truncation"] = state.reward
                state.reward = 0.0


def to_samples(batch: StepBatch, tokenizer: Any = None) -> list[Sample]:
    """One sample per model turn of every kept rollout; each turn inherits its rollout's advantage.

    A tool or multi-turn rollout has several assistant turns, each a :class:`Completion` with the
    exact prompt ids the sampler conditioned on (the conversation so far, environment and tool
    messages included) and the ids and logprobs it drew. Training each turn as its own sample keeps
    the importance ratio exact: every completion token is scored under the very prefix it was
    sampled after. Concatenating the turns into one sequence (tool tokens masked) would be cheaper,
    but is only correct when each turn's prompt extends the previous turn's prompt + completion
    token for token, which re-rendering a chat (parsed tool calls, templates) does not guarantee.
    Environment and tool tokens are in the prompts and not trained, except in an ``echo`` environment
    (with ``tokenizer``): there a turn carries the messages since the previous reply in its trained region, at
    their role's ``ce`` weight (:func:`rl_backend.observations.carry_observations`).
    """
    from evalkit.model.chat_format import encode_chat
    from rl_backend.observations import carry_observations

    samples = []
    for group in batch.kept:
        for state in group:
            advantage = batch.advantages.get((state.example_id, state.rollout_idx))
            distilled = (state.example_id, state.rollout_idx, 0) in batch.ref_logprobs
            imitated = (state.example_id, state.rollout_idx) in batch.imitated
            hint = batch.hints.get((state.example_id, state.rollout_idx))
            if advantage is None and not distilled and not imitated and hint is None:  # errored, or masked
                continue
            env = batch.env_of.get(state.example_id)
            alphas = batch.echo_roles.get(env) if env is not None and tokenizer is not None else None
            for turn, response in enumerate(state.responses):
                sample = checked_sample(response, advantage or 0.0, env, sampled_here=not imitated)
                sample.ce_actions = imitated  # the ce component: the teacher's tokens at weight 1
                if distilled:  # the ref_kl component: the teacher's view of each token, no advantage
                    sample.ref_logprobs = batch.ref_logprobs[(state.example_id, state.rollout_idx, turn)]
                if hint is not None:  # opsd: the policy reading the demonstration first is the reference
                    sample.hint_ids = encode_chat(tokenizer, [{"role": "system", "content": hint}],
                                                  generation_prompt=False)
                if alphas and turn:
                    carry_observations(sample, state, turn, alphas, tokenizer)
                samples.append(sample)
    return samples


def checked_sample(response: Completion, advantage: float, env: str | None = None, *,
                   sampled_here: bool = True) -> Sample:
    """One model turn as a sample; a UserError when the backend gave no token ids or a logprob per token.
    ``sampled_here=False`` (a frozen teacher's turn, trained with ``ce``): its logprobs are not needed."""
    if not sampled_here and response.logprobs is None and response.completion_token_ids is not None:
        response = replace(response, logprobs=[0.0] * len(response.completion_token_ids))
    if response.completion_token_ids is None or response.logprobs is None or response.prompt_token_ids is None:
        raise UserError(
            "the rollout backend returned completions without token ids/logprobs; "
            "RL needs an engine that reports them (inference.backend = 'torch' or 'vllm')"
        )
    if len(response.logprobs) != len(response.completion_token_ids):
        raise UserError(
            f"the rollout backend returned {len(response.completion_token_ids)} completion tokens but "
            f"{len(response.logprobs)} logprobs; RL needs one logprob per sampled token"
        )
    return Sample(
        prompt_ids=list(response.prompt_token_ids),
        completion_ids=list(response.completion_token_ids),
        sampler_logprobs=list(response.logprobs),
        advantage=advantage,
        env=env,
    )
