"""What one generation asks for and what it returns; validation of the asking.

Kept free of torch so the server and the client can validate and report bad requests cheaply.
A request that can never succeed (empty prompt, prompt beyond the context window, ``max_tokens``
< 1, a temperature below zero) raises :class:`InvalidRequest` before it is queued; the engine
keeps serving everyone else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from evalkit.core.sampling_rules import sampling_problems
from evalkit.core.types import SamplingArgs

ENGINE_KEYS = ("max_tokens", "temperature", "top_p", "top_k", "stop", "seed")
"""The sampling keys the engine reads; checked against :data:`evalkit.core.sampling_rules.RULES`."""
EXTRA_ENGINE_KEYS = ("min_p", "repetition_penalty")
"""Keys the engine reads from a request's extra sampling arguments (vLLM's names), checked the same way."""

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

    @cached_property
    def stop_window(self) -> int:
        """Tokens at the end of the output a stop string can lie in (its characters, plus a few tokens
        that decode to nothing): what is decoded and searched after each token, whatever the text's length."""
        return max((len(s) for s in self.stop), default=0) + 4


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
    cached_tokens: int = 0
    """Prompt tokens whose K/V came from the engine's prefix cache (not prefilled again)."""


def check_params(params: SamplingParams, prompt_len: int, context_length: int) -> None:
    """Raise :class:`InvalidRequest` for engine params built by a caller (not by :func:`sampling_params`)
    that break the shared ranges or the context window."""
    sampling_params(SamplingArgs(max_tokens=params.max_tokens), prompt_len, context_length)
    problems = sampling_problems({"temperature": params.temperature, "top_p": params.top_p, "top_k": params.top_k,
                                  "stop": list(params.stop), "min_p": params.min_p,
                                  "repetition_penalty": params.repetition_penalty})
    if problems:
        raise InvalidRequest(problems[0])


def sampling_params(sampling: SamplingArgs | None, prompt_len: int, context_length: int) -> SamplingParams:
    """Check ``sampling`` against the prompt and the context window and build engine params.

    Types and ranges are the shared table's (:data:`evalkit.core.sampling_rules.RULES`, what configs are
    checked against); what only the engine knows, the context window, is checked here.
    """
    sampling = sampling or SamplingArgs()
    if prompt_len < 1:
        raise InvalidRequest("the prompt is empty")
    room = context_length - prompt_len
    if room < 1:
        raise InvalidRequest(
            f"the prompt is {prompt_len} tokens; this model's context window is {context_length} tokens"
        )
    problems = sampling_problems({**{key: getattr(sampling, key) for key in ENGINE_KEYS},
                                  **{key: sampling.extra.get(key) for key in EXTRA_ENGINE_KEYS}})
    if problems:
        raise InvalidRequest(problems[0])
    if sampling.max_tokens is None:
        max_tokens = min(DEFAULT_MAX_TOKENS, room)
    else:
        max_tokens = sampling.max_tokens
        if prompt_len + max_tokens > context_length:
            raise InvalidRequest(
                f"prompt ({prompt_len} tokens) + max_tokens ({max_tokens}) exceeds this model's "
                f"context window of {context_length} tokens; lower max_tokens to {room} or less"
            )
    min_p, penalty = sampling.extra.get("min_p"), sampling.extra.get("repetition_penalty")
    stop = [sampling.stop] if isinstance(sampling.stop, str) else sampling.stop or []
    return SamplingParams(
        max_tokens=max_tokens,
        temperature=1.0 if sampling.temperature is None else float(sampling.temperature),
        top_p=1.0 if sampling.top_p is None else float(sampling.top_p),
        top_k=0 if sampling.top_k is None or sampling.top_k == -1 else sampling.top_k,
        stop=tuple(s for s in stop if s),
        seed=sampling.seed,
        ignore_eos=bool(sampling.extra.get("ignore_eos", False)),
        min_p=0.0 if min_p is None else float(min_p),
        repetition_penalty=1.0 if penalty is None else float(penalty),
    )
