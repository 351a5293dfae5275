"""A finished verifiers v1 episode -> one primekit rollout (``RolloutState``), for one seat or several.

An episode holds one trace per agent run (a plain taskset: one trace of its one ``agent`` seat; a multi-agent
``Env``: one or more per seat, each stamped with its seat's name and whether it trains the policy). The row:

- **reward**: the mean reward of the policy's traces (``trainable`` seats; every trace when none is), which is
  verifiers' own headline rule; for one trace, that trace's reward;
- **metrics**: each trace's rewards (their scores) and metrics, averaged per name over the traces of a seat;
  an env with several seats names them ``<seat>/<name>`` so the row says whose they are;
- **prompt**: the first trace's messages before its first sampled one: the task's system prompt and prompt,
  plus whatever the env sent before the model spoke (an env that opens the exchange itself, with
  ``interaction.turn(...)`` on a prompt-less task, puts its opening there, as verifiers' own rows have it);
- **completion**: each trace's messages from its first sampled one on, in completion order; with several
  seats each message carries ``agent: <seat>``;
- **errors**: the traces' errors (``<seat>: `` in front with several seats), then the episode's own (a raising
  ``run``/``finalize`` hook), each with the kind its verifiers type names (a provider error: ``model``; any
  other: ``environment``); a failed episode with no error recorded says so;
- **responses**: the model bridge's completions of the policy's traces, matched by the trace id verifiers sends
  with every upstream request, so RL trains only the seats that train (the other seats' tokens still count in
  the row's usage);
- **usage**: ``input_tokens`` is verifiers' own count (``Trace.num_input_tokens``: fed-in tokens counted
  once, summed over the traces); every call's prompt summed is ``input_tokens_per_call``;
- **seat rows** (several seats): besides the episode's state (what RL and ``traces.jsonl`` read), one
  state per trace in ``RolloutState.seats``, which the eval writes as the rows: each seat's own prompt,
  conversation, reward, metrics (unprefixed), errors and usage, with ``episode_id``/``agent``/``trainable``
  columns, as verifiers writes one sample per trace;
- ``extra``: the trace's ``info`` and ``trace_id`` (one trace), plus ``agents`` (one summary per trace) when
  there are several, and the episode itself under :data:`EPISODE_KEY` for ``traces.jsonl``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from evalkit.core.errors import ENVIRONMENT, MODEL
from evalkit.core.types import Completion, RolloutState
from evalkit.core.untrusted import cap_message
from evalkit.verifiers_compat.convert import to_openai_messages

EPISODE_KEY = "_verifiers_episode"
"""``RolloutState.extra`` key holding the verifiers ``Episode`` (written to ``traces.jsonl``, never a row column)."""

_MODEL_ERROR_TYPES = frozenset({"ProviderError", "OverlongPromptError"})
"""verifiers v1's error types for a failed model request (``verifiers.v1.errors``); every other type
(harness, toolset, task hook or reward, sandbox, env, interception) is environment code's."""


def copy_episode(episode: Any, state: RolloutState, calls: list[tuple[str | None, Completion]],
                 multi_seat: bool) -> None:
    """Fill ``state`` from ``episode`` (see the module docstring); ``calls`` are the bridge's (trace id,
    completion) pairs in order; ``multi_seat``: the env declares several seats."""
    traces = list(episode.traces)
    policy = [t for t in traces if t.agent.trainable] or traces
    errors: list[tuple[str, str]] = []
    for trace in traces:
        prefix = f"{trace.agent.name}: " if multi_seat else ""
        errors += [(_kind(e), f"{prefix}{e.type}: {e.message}") for e in trace.errors]
        if not trace.ok and not trace.errors and not episode.errors:
            errors.append((ENVIRONMENT, f"{prefix}verifiers marked the rollout failed (stop condition "
                                        f"{trace.stop_condition})"))
    errors += [(_kind(e), f"{e.type}: {e.message}") for e in episode.errors]
    if not traces and not errors:
        errors.append((ENVIRONMENT, "verifiers ran no agent for this task"))
    if policy:
        opening = _opening(traces[0])
        if opening:
            state.prompt = opening
        state.completion = [message for trace in traces for message in _messages(trace, multi_seat)]
        state.turns = sum(trace.num_turns for trace in traces)
        state.stop_condition = policy[-1].stop_condition
        state.is_truncated = any(bool(trace.is_truncated) for trace in policy)
        state.reward = sum(float(trace.reward) for trace in policy) / len(policy)
        state.metrics = _metrics(traces, multi_seat)
        last = policy[-1]
        state.extra = {**last.info, "trace_id": last.id}
        if len(traces) > 1:
            state.extra["agents"] = [_summary(trace) for trace in traces]
    state.fed_input_tokens = sum(int(trace.num_input_tokens) for trace in traces)  # verifiers' own count
    policy_ids = {trace.id for trace in policy}
    state.responses = []
    for session, completion in calls:
        if session is None or session in policy_ids:
            state.responses.append(completion)
        else:  # not trained on, but its tokens were spent: the skeleton sums only ``responses``
            state.usage.add(completion.usage)
    state.extra[EPISODE_KEY] = episode
    for kind, message in errors:
        state.record_error(kind, message)
    if multi_seat:
        state.seats = [_seat_state(state, trace, episode, calls) for trace in traces]


def copy_partial(traces: list[Any], state: RolloutState, calls: list[tuple[str | None, Completion]],
                 multi_seat: bool) -> None:
    """Fill ``state`` with what an episode cut short (a rollout timeout cancelled it) did so far: ``traces`` are
    verifiers' live ones (``RunSlot.traces``: the messages of every model turn done), ``calls`` the bridge's for
    them. The prompt, completion, turn count, responses and an unfinished ``Episode`` for ``traces.jsonl``; no
    reward, metrics nor errors (the caller records why it stopped)."""
    from verifiers.v1 import Episode

    traces = list(traces)
    if traces:
        opening = _opening(traces[0])
        if opening:
            state.prompt = opening
        state.completion = [message for trace in traces for message in _messages(trace, multi_seat)]
        state.turns = sum(trace.num_turns for trace in traces)
        state.extra = {**traces[-1].info, "trace_id": traces[-1].id,
                       EPISODE_KEY: Episode.model_construct(task=traces[0].task, traces=traces, ok=False)}
    state.responses = [completion for _, completion in calls]


def _seat_state(
    state: RolloutState, trace: Any, episode: Any, calls: list[tuple[str | None, Completion]]
) -> RolloutState:
    """One seat's row of a multi-seat episode, as verifiers writes it (one sample per trace): the trace's own
    prompt, conversation, reward, metrics, errors (and the episode's) and usage, with ``episode_id``,
    ``agent`` and ``trainable`` columns so the episode can be grouped."""
    seat = RolloutState(
        example_id=state.example_id,
        rollout_idx=state.rollout_idx,
        prompt=_opening(trace) or state.prompt,
        answer=state.answer,
        info=state.info,
        task=state.task,
    )
    seat.completion = [cap_message(message, state.max_message_chars) for message in _messages(trace, False)]
    seat.turns, seat.stop_condition = trace.num_turns, trace.stop_condition
    seat.is_truncated = bool(trace.is_truncated)
    seat.reward, seat.metrics = float(trace.reward), _metrics([trace], False)
    for _, completion in (call for call in calls if call[0] == trace.id):
        seat.usage.add(completion.usage)
    seat.fed_input_tokens = int(trace.num_input_tokens)
    seat.extra = {**trace.info, "trace_id": trace.id}
    if "agents" in state.extra:  # -C agents: the episode's seats, on each of its rows
        seat.extra["agents"] = state.extra["agents"]
    seat.columns = {"episode_id": episode.id, "agent": trace.agent.name, "trainable": bool(trace.agent.trainable)}
    seat.max_message_chars = state.max_message_chars
    for error in [*trace.errors, *episode.errors]:
        seat.record_error(_kind(error), f"{error.type}: {error.message}")
    if not trace.ok and not trace.errors and not episode.errors:
        seat.record_error(ENVIRONMENT, f"verifiers marked the rollout failed (stop condition {trace.stop_condition})")
    return seat


def _split(trace: Any) -> tuple[list[Any], int]:
    """The nodes of the trace's last branch and the index of its first sampled one (their count if none)."""
    nodes = list(trace.branches[-1].nodes) if trace.branches else []
    return nodes, next((i for i, node in enumerate(nodes) if node.sampled), len(nodes))


def _opening(trace: Any) -> list[dict[str, Any]]:
    """What the model was shown before its first reply in this trace."""
    nodes, first = _split(trace)
    return to_openai_messages(node.message for node in nodes[:first])


def _messages(trace: Any, tag: bool) -> list[dict[str, Any]]:
    """The trace's conversation from its first sampled message on (its last branch), tagged with its seat."""
    nodes, first = _split(trace)
    messages = to_openai_messages(node.message for node in nodes[first:])
    return [{**message, "agent": trace.agent.name} for message in messages] if tag else messages


def _metrics(traces: list[Any], multi_seat: bool) -> dict[str, float]:
    values: dict[str, list[float]] = defaultdict(list)
    for trace in traces:
        prefix = f"{trace.agent.name}/" if multi_seat else ""
        for name, reward in trace.rewards.items():
            if reward is not None:
                values[prefix + name].append(float(reward.score))
        for name, value in trace.metrics.items():
            if value is not None:
                values[prefix + name].append(float(value))
    return {name: sum(v) / len(v) for name, v in values.items()}


def _summary(trace: Any) -> dict[str, Any]:
    return {"agent": trace.agent.name, "trainable": bool(trace.agent.trainable), "reward": float(trace.reward),
            "turns": trace.num_turns, "stop_condition": trace.stop_condition, "ok": bool(trace.ok),
            "trace_id": trace.id}


def _kind(error: Any) -> str:
    """A verifiers error's kind, from its recorded type (never from its message)."""
    return MODEL if error.type in _MODEL_ERROR_TYPES else ENVIRONMENT
