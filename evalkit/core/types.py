"""Plain data shared by every part: chat messages, sampling settings, completions, rollout states.

These types are the contracts between environments, model clients, the eval runner, GEPA and the
RL trainer. They hold no behaviour beyond (de)serialisation so that every part can depend on them.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from evalkit.core.errors import UNKNOWN, UNSCORED_KINDS, ConfigError
from evalkit.core.redact import redact
from evalkit.core.sampling_rules import sampling_problems

Message = dict[str, Any]
"""An OpenAI-style chat message: ``{"role": ..., "content": ..., "tool_calls"?: [...], "tool_call_id"?: ...}``."""

ExampleId = int | str
"""An example's id in rows: its index in its split, or the task's own id where verifiers writes that instead (a
legacy row whose ``info`` carries a task payload with an ``example_id``), so rows join with verifiers' own."""


def id_order(example_id: ExampleId) -> tuple[int, int | str]:
    """A sort key for example ids of both kinds (an old run's ints beside a task's own strings): ints by value,
    then text; never compares an int with a string."""
    return (0, example_id) if isinstance(example_id, int) else (1, str(example_id))


def row_order(row: dict[str, Any]) -> tuple[tuple[int, int | str], int]:
    """A row's place in (example, rollout) order."""
    return id_order(row["example_id"]), int(row.get("rollout_idx") or 0)


@dataclass
class SamplingArgs:
    """Sampling settings for one model call. ``None`` means "the server's/engine's default".

    ``extra`` carries provider-specific keys (passed through to OpenAI-compatible servers as extra body).
    """

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop: list[str] | None = None
    seed: int | None = None
    logprobs: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> SamplingArgs:
        """Build from a user dict (``-S`` JSON, a TOML ``[sampling]`` table); unknown keys go to ``extra``.

        Known keys of the wrong type or range are a :class:`ConfigError` (:mod:`evalkit.core.sampling_rules`).
        """
        data = dict(data or {})
        problems = sampling_problems(data)
        if problems:
            raise ConfigError("sampling args: " + "; ".join(problems))
        known = {k: data.pop(k) for k in list(data) if k in _SAMPLING_FIELDS}
        if "max_completion_tokens" in data and "max_tokens" not in known:
            known["max_tokens"] = data.pop("max_completion_tokens")
        if isinstance(known.get("stop"), str):
            known["stop"] = [known["stop"]]
        return cls(**known, extra=data)

    def merged(self, other: SamplingArgs | dict[str, Any] | None) -> SamplingArgs:
        """A copy where every value set in ``other`` overrides this one's."""
        if other is None:
            return SamplingArgs(**self._fields())
        if isinstance(other, dict):
            other = SamplingArgs.from_dict(other)
        mine = self._fields()
        for key, value in other._fields().items():
            if key == "extra":
                mine["extra"] = {**mine["extra"], **value}
            elif key == "logprobs":
                mine["logprobs"] = mine["logprobs"] or value
            elif value is not None:
                mine[key] = value
        return SamplingArgs(**mine)

    def _fields(self) -> dict[str, Any]:
        """A field dict with copied containers; cheaper than ``asdict`` (no deepcopy), which ran once
        per rollout and showed up at ~10% of the eval harness's CPU."""
        return {
            "max_tokens": self.max_tokens, "temperature": self.temperature, "top_p": self.top_p,
            "top_k": self.top_k, "stop": list(self.stop) if self.stop is not None else None,
            "seed": self.seed, "logprobs": self.logprobs, "extra": dict(self.extra),
        }

    def to_dict(self) -> dict[str, Any]:
        """Only the keys that are set, ``extra`` flattened in (what metadata.json records)."""
        # ``is`` rather than ``in (None, False)``: 0 == False, and temperature 0 / seed 0 are settings
        out = {k: v for k, v in self._fields().items() if k != "extra" and v is not None and v is not False}
        if self.extra:  # deep-copied, as ``asdict`` did (only ``extra`` can nest)
            out.update(copy.deepcopy(self.extra))
        return out


_SAMPLING_FIELDS = {"max_tokens", "temperature", "top_p", "top_k", "stop", "seed", "logprobs"}


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens


@dataclass
class ToolCall:
    """A tool call as the model asked for it; ``arguments`` is the raw JSON string the model wrote."""

    id: str
    name: str
    arguments: str

    def to_message_dict(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass
class Completion:
    """One model reply.

    ``prompt_token_ids``, ``completion_token_ids`` and ``logprobs`` (one per completion token, of the
    sampled token under the sampler's temperature-scaled distribution) are filled by clients that can
    (the embedded engine always; OpenAI-compatible servers when asked and able). RL needs them.
    ``finish_reason`` is ``"stop"``, ``"length"`` or ``"tool_calls"``.
    """

    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str = "stop"
    usage: Usage = field(default_factory=Usage)
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None

    def to_message(self) -> Message:
        """The assistant message to append to the conversation."""
        message: Message = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            message["tool_calls"] = [call.to_message_dict() for call in self.tool_calls]
        return message


@dataclass
class RolloutState:
    """Everything one rollout produced; one row of ``results.jsonl`` is derived from it.

    ``responses`` holds the raw :class:`Completion` of every model turn in order (token ids and
    logprobs for the trainer). ``extra`` is the environment's own scratch state (e.g. wordle's
    guesses); chosen keys of it become ``-C/--state-columns`` columns.
    """

    example_id: ExampleId
    rollout_idx: int
    prompt: list[Message]
    answer: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    task: str = ""
    completion: list[Message] = field(default_factory=list)
    responses: list[Completion] = field(default_factory=list)
    reward: float = 0.0
    metrics: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    error_kind: str | None = None
    """``model``, ``environment``, ``reward`` or ``timeout`` (see :mod:`evalkit.core.errors`), set with
    ``error`` by :meth:`record_error`."""
    stop_condition: str | None = None
    is_truncated: bool = False
    turns: int = 0
    usage: Usage = field(default_factory=Usage)
    fed_input_tokens: int | None = None
    """Input tokens counted once, as verifiers v1 counts them (each call's prompt beyond the previous call's
    sequence); when set, the row's ``input_tokens`` and ``usage.input_tokens`` (every call's prompt summed)
    goes to ``input_tokens_per_call``. None: the environment has no such count (legacy verifiers and native
    environments count every call's prompt, as verifiers 0.3.1's legacy rows do)."""
    timing: dict[str, float] = field(default_factory=lambda: {"generation_ms": 0.0, "scoring_ms": 0.0, "total_ms": 0.0})
    extra: dict[str, Any] = field(default_factory=dict)
    columns: dict[str, Any] = field(default_factory=dict)
    """Row columns the environment adds beside the standard ones (a seat row's ``episode_id``, ``agent``,
    ``trainable``)."""
    seats: list[RolloutState] = field(default_factory=list)
    """A multi-seat episode's rows, one state per seat's trace with its own reward (as verifiers writes them);
    empty: this state is the row. RL reads this state (the episode), never the seats."""
    max_message_chars: int | None = None
    """The run's cap on one message the environment adds (:mod:`evalkit.core.defaults`); not part of the row."""

    def record_error(self, kind: str, message: str) -> None:
        """Add an error of ``kind``; a second error joins the first. The kind stays the first one's,
        unless that one left a score (``reward``) and this one does not: what stopped a rollout first is its kind.

        ``message`` is redacted here (:func:`evalkit.core.redact.redact`), whoever raised it: an environment, a
        tool, a judge that echoes the request headers in its error."""
        message = redact(str(message))
        self.error = f"{self.error}; {message}" if self.error else message
        if self.error_kind is None or (kind in UNSCORED_KINDS and self.error_kind not in UNSCORED_KINDS):
            self.error_kind = kind

    @property
    def kind_of_error(self) -> str | None:
        """The error's kind; ``unknown`` for an ``error`` set without :meth:`record_error`."""
        return (self.error_kind or UNKNOWN) if self.error else None

    @property
    def scored(self) -> bool:
        """Whether ``reward`` is a score: no error, or only reward-function errors."""
        return self.kind_of_error not in UNSCORED_KINDS

    def row_states(self) -> list[RolloutState]:
        """The states whose rows this rollout writes: its seats (given the episode's timing, and its error when
        it failed in a way no seat recorded), else itself."""
        if not self.seats:
            return [self]
        for seat in self.seats:
            seat.timing = dict(self.timing)
        if self.error and not any(seat.error for seat in self.seats):
            for seat in self.seats:
                seat.record_error(self.kind_of_error or UNKNOWN, self.error)
        return list(self.seats)

    def _token_usage(self) -> dict[str, int]:
        usage = {"input_tokens": self.usage.input_tokens, "output_tokens": self.usage.output_tokens}
        if self.fed_input_tokens is not None:
            usage = {"input_tokens": self.fed_input_tokens, "output_tokens": self.usage.output_tokens,
                     "input_tokens_per_call": self.usage.input_tokens}
        return usage

    def to_row(self, state_columns: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
        """The JSON-serialisable ``results.jsonl`` row (no token ids/logprobs: those stay in memory)."""
        row: dict[str, Any] = {
            "example_id": self.example_id,
            "rollout_idx": self.rollout_idx,
            "prompt": self.prompt,
            "completion": self.completion,
            "answer": self.answer,
            "info": self.info,
            "reward": self.reward,
            "metrics": self.metrics,
            "error": self.error,
            "error_kind": self.kind_of_error,
            "stop_condition": self.stop_condition,
            "is_truncated": self.is_truncated,
            "timing": self.timing,
            "token_usage": self._token_usage(),
        }
        row.update(self.columns)
        for column in state_columns:
            row[column] = self.extra.get(column)
        return row
