"""What one generation asks for and what it returns; validation of the asking.

Kept free of torch so the server and the client can validate and report bad requests cheaply.
A request that can never succeed (empty prompt, prompt beyond the context window, ``max_tokens``
< 1, a temperature below zero) raises :class:`InvalidRequest` before it is queued; the engine
keeps serving everyone else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from evalkit.types import SamplingArgs

DEFAULT_MAX_TOKENS = 1024
"""Used when a request sets no ``max_tokens`` (clipped to the room left in the context window);
a cap, because a 135M model left to run to 8k tokens mostly repeats itself."""


class InvalidRequest(ValueError):
    """A request the engine refuses (the HTTP server answers 400; the client raises ModelCallError)."""


@dataclass(frozen=True)
class SamplingParams:
    """Validated, engine-side sampling settings of one request.

    ``temperature == 0`` is greedy. ``top_k == 0``, ``top_p == 1`` and ``min_p == 0`` switch those
    filters off; ``repetition_penalty == 1`` switches the penalty off. ``seed`` seeds the request's own
    random stream (one draw per sampled token), so a seeded request does not depend on which other
    requests share its batch.
    """

    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    ignore_eos: bool = False
    min_p: float = 0.0
    repetition_penalty: float = 1.0

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def filtered(self) -> bool:
        return not self.greedy and (self.top_k > 0 or self.top_p < 1.0 or self.min_p > 0.0)

    @property
    def penalized(self) -> bool:
        return self.repetition_penalty != 1.0


@dataclass
class GenerationResult:
    """One finished generation.

    ``token_ids`` are every sampled token, including the EOS that ended it and the tokens that
    completed a stop string (the trainer needs exactly what was sampled); ``text`` is their decoding
    without special tokens, cut before the stop string. ``logprobs[i]`` is ``log p(token_ids[i])``
    under the distribution the token was drawn from (see :mod:`evalkit.model.sampling`).
    """

    text: str
    finish_reason: str
    prompt_ids: list[int]
    token_ids: list[int]
    logprobs: list[float]
    weights_version: int = 0
    timing: dict[str, float] = field(default_factory=dict)


def sampling_params(sampling: SamplingArgs | None, prompt_len: int, context_length: int) -> SamplingParams:
    """Check ``sampling`` against the prompt and the context window and build engine params."""
    sampling = sampling or SamplingArgs()
    if prompt_len < 1:
        raise InvalidRequest("the prompt is empty")
    room = context_length - prompt_len
    if room < 1:
        raise InvalidRequest(
            f"the prompt is {prompt_len} tokens; this model's context window is {context_length} tokens"
        )
    if sampling.max_tokens is None:
        max_tokens = min(DEFAULT_MAX_TOKENS, room)
    else:
        max_tokens = _integer("max_tokens", sampling.max_tokens)
        if max_tokens < 1:
            raise InvalidRequest(f"max_tokens must be at least 1, got {sampling.max_tokens}")
        if prompt_len + max_tokens > context_length:
            raise InvalidRequest(
                f"prompt ({prompt_len} tokens) + max_tokens ({max_tokens}) exceeds this model's "
                f"context window of {context_length} tokens; lower max_tokens to {room} or less"
            )
    temperature = 1.0 if sampling.temperature is None else _number("temperature", sampling.temperature)
    if temperature < 0:
        raise InvalidRequest(f"temperature must be >= 0, got {temperature}")
    top_p = 1.0 if sampling.top_p is None else _number("top_p", sampling.top_p)
    if not 0.0 < top_p <= 1.0:
        raise InvalidRequest(f"top_p must be in (0, 1], got {top_p}")
    top_k = 0 if sampling.top_k is None or sampling.top_k == -1 else _integer("top_k", sampling.top_k)
    if top_k < 0:
        raise InvalidRequest(f"top_k must be >= 0 (0 or -1: off), got {top_k}")
    min_p = _number("min_p", sampling.extra.get("min_p") or 0.0)
    if not 0.0 <= min_p <= 1.0:
        raise InvalidRequest(f"min_p must be in [0, 1], got {min_p}")
    penalty = _number("repetition_penalty", sampling.extra.get("repetition_penalty") or 1.0)
    if penalty <= 0:
        raise InvalidRequest(f"repetition_penalty must be above 0, got {penalty}")
    stop = tuple(s for s in (sampling.stop or []) if s)
    if any(not isinstance(s, str) for s in stop):
        raise InvalidRequest("stop must be a string or a list of strings")
    seed = None if sampling.seed is None else _integer("seed", sampling.seed)
    return SamplingParams(
        max_tokens=max_tokens,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        stop=stop,
        seed=seed,
        ignore_eos=bool(sampling.extra.get("ignore_eos", False)),
        min_p=min_p,
        repetition_penalty=penalty,
    )


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidRequest(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _integer(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest(f"{name} must be an integer, got {value!r}")
    return value
