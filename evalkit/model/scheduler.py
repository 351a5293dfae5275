"""Continuous batching: which sequences run, where their K/V live, when they finish.

Owned by the engine's worker thread (nothing here is thread-safe). Each round: queued requests
are admitted into free slots (up to ``max_batch``, within the KV-cache budget) and prefilled
together; then every live sequence decodes a *window* of steps with no host synchronisation
(:class:`~evalkit.model.stepper.DecodeStepper`); then the host reads the window's tokens, finds
the sequences that finished (EOS, a stop string, ``max_tokens``, a cancelled caller), resolves
them and compacts the batch by moving the last live slots into the holes.

A window never runs past any sequence's ``max_tokens``; a sequence that hits EOS or a stop string
inside a window decoded its remaining steps for nothing, and those tokens are dropped. On CPU the
window is one step (a token costs far more than a host round trip); on CUDA it is several.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from evalkit.model.kvcache import KVCache
from evalkit.model.prefix_cache import MIN_REUSE, PrefixCache, PrefixEntry, PrefixIndex, block_hashes, common_prefix
from evalkit.model.requests import GenerationResult, SamplingParams
from evalkit.model.sampling import sample, sampling_mode
from evalkit.model.stepper import DecodeStepper, SlotState, attend_length
from evalkit.model.threads import ThreadTuner

TokenListener = Callable[[list[int], list[float]], None]
"""``(new token ids, their logprobs)``, called on the engine's worker thread as a sequence grows."""


@dataclass
class Sequence:
    """One request in flight; its index in :attr:`Scheduler.active` is its KV-cache slot."""

    prompt_ids: list[int]
    params: SamplingParams
    future: concurrent.futures.Future
    seed: int
    submitted: float
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    length: int = 0
    """Positions of this sequence already in the KV cache."""
    stop_hit: str | None = None
    kv_version: int = 0
    """The prefix cache's weights version when this sequence was prefilled: its K/V are that version's
    (or, after an update without draining, partly older), and are saved only under that version."""
    started: float = 0.0
    on_tokens: TokenListener | None = None
    """Told each increment of sampled tokens (see :meth:`evalkit.model.engine.Engine.submit`)."""
    reused: int = 0
    """Prompt positions whose K/V came from the prefix cache instead of being prefilled."""
    prefix: PrefixEntry | None = None

    @property
    def worst_length(self) -> int:
        return len(self.prompt_ids) + self.params.max_tokens


@dataclass
class Limits:
    """How much the scheduler may hold at once."""

    max_batch: int
    kv_budget_bytes: float
    prefill_tokens: int
    """Most padded prompt tokens prefilled in one forward; bounds a prefill's activation memory."""
    window: int
    """Decode steps between host synchronisations."""
    prefix_bytes: float = 0.0
    """Most K/V bytes the prefix cache keeps for reuse (:mod:`evalkit.model.prefix_cache`); 0: no reuse."""


class Scheduler:
    """The batch: admit, prefill, decode a window, retire. See the module docstring."""

    def __init__(
        self,
        forward: Any,
        dtype: torch.dtype,
        limits: Limits,
        finisher: Finisher,
        *,
        graphs: bool,
        bucketed: bool,
        tuner: ThreadTuner | None,
    ):
        self.forward = forward
        self.limits = limits
        self.finisher = finisher
        self.tuner = tuner
        self.cache = KVCache(forward.cache_shape, limits.max_batch, dtype, forward.device)
        self.state = SlotState(limits.max_batch, limits.window, forward.device)
        self.stepper = DecodeStepper(
            forward, self.cache, self.state, graphs=graphs, max_rows=limits.max_batch, bucketed=bucketed
        )
        self.active: list[Sequence] = []
        self._kv_bytes = KVCache.bytes_per_position(forward.cache_shape, dtype)
        self.prefixes = PrefixCache(forward.cache_shape, dtype, forward.device, limits.prefix_bytes)

    # -- admission -------------------------------------------------------------------------------

    def admit(self, pending: deque[Sequence]) -> list[Sequence]:
        """Queued requests that fit now: free slots, and a KV cache that would stay within budget
        even if every admitted sequence ran to its ``max_tokens``. The first request of an idle
        engine is always admitted (on a fresh cache if the old one is big)."""
        admitted: list[Sequence] = []
        need = max((s.worst_length for s in self.active), default=0)
        while pending and len(self.active) + len(admitted) < self.limits.max_batch:
            candidate = pending[0]
            count = len(self.active) + len(admitted) + 1
            longest = max(need, candidate.worst_length)
            slots = max(self.cache.slots, 1 << (count - 1).bit_length())
            planned = (
                min(slots, max(self.cache.max_slots, count)) * self.cache.planned_capacity(longest) * self._kv_bytes
            )
            if planned > self.limits.kv_budget_bytes and count > 1:
                break
            admitted.append(pending.popleft())
            need = longest
        return admitted

    def prefill(self, admitted: list[Sequence]) -> None:
        """Prefill ``admitted`` in chunks, sample each one's first token, and add them to the batch.

        With the prefix cache on, requests that share a long prefix with an earlier one of this
        round (a group's rollouts) wait for a second wave, and reuse the K/V the first wave saved."""
        admitted = [s for s in admitted if not s.future.cancelled()]
        for wave in self._waves(admitted):
            for sequence in wave:
                sequence.prefix, sequence.reused = self.prefixes.lookup(sequence.prompt_ids)
                sequence.kv_version = self.prefixes.version
            for chunk in _prefill_chunks(wave, self.limits.prefill_tokens):
                self._prefill_chunk(chunk)

    def _waves(self, admitted: list[Sequence]) -> list[list[Sequence]]:
        """(leaders, followers): a follower shares at least :data:`MIN_REUSE` more tokens with a
        leader's prompt than with anything the prefix cache holds now."""
        if not self.prefixes.enabled or len(admitted) < 2:
            return [admitted]
        leaders: list[tuple[Sequence, torch.Tensor]] = []
        followers: list[Sequence] = []
        by_blocks = PrefixIndex()  # leaders by whole-block prefix: no leader-by-leader scan
        for sequence in admitted:
            ids = torch.tensor(sequence.prompt_ids, dtype=torch.long)
            hashes = block_hashes(sequence.prompt_ids)
            shared = max((common_prefix(ids, leaders[i][1]) for i in by_blocks.deepest(hashes)), default=0)
            if shared >= MIN_REUSE and shared >= self.prefixes.lookup(sequence.prompt_ids)[1] + MIN_REUSE:
                followers.append(sequence)
            else:
                by_blocks.add(len(leaders), hashes)
                leaders.append((sequence, ids))
        return [wave for wave in ([s for s, _ in leaders], followers) if wave]

    def _prefill_chunk(self, chunk: list[Sequence]) -> None:
        first = len(self.active)
        now = time.perf_counter()
        slots = list(range(first, first + len(chunk)))
        prompts = [s.prompt_ids for s in chunk]
        for sequence in chunk:
            sequence.started = now
            sequence.length = len(sequence.prompt_ids)
        if any(s.reused for s in chunk):
            self.cache.ensure(first + len(chunk), max(len(p) for p in prompts))
            groups: dict[tuple[int, int], tuple[PrefixEntry, list[int]]] = {}
            for slot, sequence in zip(slots, chunk):
                if sequence.prefix is not None:
                    groups.setdefault((id(sequence.prefix), sequence.reused), (sequence.prefix, []))[1].append(slot)
            for (_, reused), (entry, group) in groups.items():
                self.prefixes.restore(entry, self.cache, group, reused)
        logits = self.forward.prefill(self.cache, slots, prompts, [s.reused for s in chunk])
        self._count(chunk)
        for slot, sequence in zip(slots, chunk):
            sequence.prefix = None
            self.prefixes.save(self.cache, slot, sequence.prompt_ids, sequence.kv_version)
        st = self.state
        st.configure(first, [s.params for s in chunk], [s.seed for s in chunk], prompts, logits.shape[-1])
        rows = slice(first, first + len(chunk))
        mode = sampling_mode(s.params for s in chunk)
        tokens, logprobs = sample(logits, st.settings(rows), st.seeds[rows], st.counters[rows], mode)
        if mode.penalized and st.seen is not None:
            st.seen[rows].scatter_(1, tokens[:, None], True)
        st.start(first, tokens, [s.length for s in chunk])
        self.active.extend(chunk)
        self._settle(first, [[t] for t in tokens.tolist()], [[lp] for lp in logprobs.tolist()])

    def _count(self, chunk: list[Sequence]) -> None:
        stats = self.prefixes.stats
        for sequence in chunk:
            stats.prompt_tokens += len(sequence.prompt_ids)
            stats.reused_tokens += sequence.reused
            stats.prefilled_tokens += len(sequence.prompt_ids) - sequence.reused

    # -- decoding --------------------------------------------------------------------------------

    def decode(self) -> None:
        """One window of decode steps for every live sequence, then settle what they produced."""
        batch = len(self.active)
        steps = min(self.limits.window, min(s.params.max_tokens - len(s.token_ids) for s in self.active))
        needed = max(s.length for s in self.active) + steps
        self.cache.ensure(self.stepper.rows(batch), needed)
        length = attend_length(needed, self.cache.capacity, self.stepper.bucketed)
        mode = sampling_mode(s.params for s in self.active)
        for _ in range(steps):
            if self.tuner is not None:
                self.tuner.before_step()
            started = time.perf_counter()
            self.stepper.step(batch, length, mode)
            if self.tuner is not None:
                self.tuner.after_step(batch, time.perf_counter() - started)
        tokens, logprobs = self.stepper.collect(batch, steps)
        for sequence in self.active:
            sequence.length += steps
        self._settle(0, tokens, logprobs)

    def _settle(self, first: int, tokens: list[list[int]], logprobs: list[list[float]]) -> None:
        """Give slots ``first..`` their new tokens; resolve the finished, drop the cancelled, compact."""
        done: list[int] = []
        for offset, (new_tokens, new_logprobs) in enumerate(zip(tokens, logprobs)):
            slot = first + offset
            sequence = self.active[slot]
            before = len(sequence.token_ids)
            reason = self.finisher.extend(sequence, new_tokens, new_logprobs)
            if sequence.on_tokens is not None and not _notify(sequence, before):
                done.append(slot)
            elif reason is not None:
                self._keep_prefix(slot, sequence)
                self.finisher.resolve(sequence, reason)
                done.append(slot)
            elif sequence.future.cancelled():
                done.append(slot)
        if done:
            self._compact(done)

    def _keep_prefix(self, slot: int, sequence: Sequence) -> None:
        """Save a finished sequence's K/V for the conversation's next turn: the prompt and every
        sampled token but the last (never fed back, so its K/V were not computed)."""
        if self.prefixes.enabled:
            cached = min(sequence.length, len(sequence.prompt_ids) + len(sequence.token_ids) - 1)
            self.prefixes.save(
                self.cache, slot, (sequence.prompt_ids + sequence.token_ids)[:cached], sequence.kv_version
            )

    def _compact(self, done: list[int]) -> None:
        moves = compaction_moves(len(self.active), done)
        sources, targets = [src for src, _ in moves], [dst for _, dst in moves]
        longest = max((self.active[src].length for src in sources), default=0)
        self.cache.move(sources, targets, longest)
        self.state.move(sources, targets)
        for src, dst in moves:
            self.active[dst] = self.active[src]
        del self.active[len(self.active) - len(done) :]
        self.state.park(len(self.active))

    # -- failure and idling ------------------------------------------------------------------------

    def fail_all(self, error: BaseException, extra: list[Sequence] | None = None) -> None:
        """Fail every live sequence (and ``extra``) and start over on a fresh cache."""
        fail(self.active + (extra or []), error)
        self.active.clear()
        self.prefixes.clear()
        self.cache.reset()
        self.stepper.reset()

    def trim(self) -> None:
        """Give a big idle cache back -- except under CUDA graphs, which would all be captured
        again for the new allocation (its size stays within the KV budget anyway)."""
        if not self.active and not self.stepper.graphs and self.cache.slots * self.cache.capacity > 8 * 1024:
            self.cache.reset()


class Finisher:
    """Decides when a sequence is done and builds its result (stop ids, stop strings, max_tokens)."""

    def __init__(self, tokenizer: Any, stop_token_ids: frozenset[int], weights_version: Callable[[], int]):
        self.tokenizer = tokenizer
        self.stop_token_ids = stop_token_ids
        self.weights_version = weights_version

    def extend(self, sequence: Sequence, tokens: list[int], logprobs: list[float]) -> str | None:
        """Append ``tokens`` until one finishes ``sequence``; the finish reason, or ``None``."""
        params = sequence.params
        quick = not params.stop and (params.ignore_eos or self.stop_token_ids.isdisjoint(tokens))
        if quick and len(sequence.token_ids) + len(tokens) < params.max_tokens:
            sequence.token_ids.extend(tokens)
            sequence.logprobs.extend(logprobs)
            return None
        for token, logprob in zip(tokens, logprobs):
            sequence.token_ids.append(token)
            sequence.logprobs.append(logprob)
            reason = self._reason(sequence, token)
            if reason is not None:
                return reason
        return None

    def _reason(self, sequence: Sequence, token: int) -> str | None:
        params = sequence.params
        if not params.ignore_eos and token in self.stop_token_ids:
            return "stop"
        if params.stop:
            tail = self.tokenizer.decode(sequence.token_ids[-params.stop_window:], skip_special_tokens=True)
            hit = next((s for s in params.stop if s in tail), None)
            if hit is not None:
                sequence.stop_hit = hit
                return "stop"
        if len(sequence.token_ids) >= params.max_tokens:
            return "length"
        return None

    def resolve(self, sequence: Sequence, reason: str) -> None:
        ids = sequence.token_ids
        body = ids[:-1] if ids and ids[-1] in self.stop_token_ids and not sequence.params.ignore_eos else ids
        text = self.tokenizer.decode(body, skip_special_tokens=True)
        if sequence.stop_hit is not None:
            cuts = [text.find(s) for s in sequence.params.stop if s in text]
            if cuts:
                text = text[: min(cuts)]
        now = time.perf_counter()
        result = GenerationResult(
            text=text,
            finish_reason=reason,
            prompt_ids=sequence.prompt_ids,
            token_ids=list(ids),
            logprobs=list(sequence.logprobs),
            weights_version=self.weights_version(),
            timing={
                "queue_ms": (sequence.started - sequence.submitted) * 1000,
                "total_ms": (now - sequence.submitted) * 1000,
            },
            cached_tokens=sequence.reused,
        )
        _set(sequence.future, result)


def compaction_moves(count: int, done: list[int]) -> list[tuple[int, int]]:
    """(source, target) slot moves that fill the holes ``done`` leaves among ``count`` slots with
    the live slots beyond the new end, so the live ones become ``0..count-len(done)-1``."""
    gone = set(done)
    live = count - len(gone)
    holes = [slot for slot in range(live) if slot in gone]
    movers = [slot for slot in range(live, count) if slot not in gone]
    return list(zip(movers, holes))


def _prefill_chunks(sequences: list[Sequence], budget: int) -> list[list[Sequence]]:
    """Consecutive groups whose padded size (count x longest prompt part to compute) stays within ``budget``."""
    chunks: list[list[Sequence]] = []
    current: list[Sequence] = []
    longest = 0
    for sequence in sequences:
        size = len(sequence.prompt_ids) - sequence.reused
        if current and (len(current) + 1) * max(longest, size) > budget:
            chunks.append(current)
            current, longest = [], 0
        current.append(sequence)
        longest = max(longest, size)
    if current:
        chunks.append(current)
    return chunks


def _notify(sequence: Sequence, before: int) -> bool:
    """Tell the sequence's listener its tokens from ``before`` on; a listener that raises fails its
    own request (with that exception) and nobody else's. ``False`` when it raised."""
    try:
        sequence.on_tokens(sequence.token_ids[before:], sequence.logprobs[before:])  # type: ignore[misc]
    except Exception as exc:  # noqa: BLE001 - the caller's bug, reported on the caller's future
        fail([sequence], exc)
        return False
    return True


def _set(future: concurrent.futures.Future, result: GenerationResult) -> None:
    try:
        if not future.cancelled():
            future.set_result(result)
    except concurrent.futures.InvalidStateError:  # cancelled between the check and the set
        pass


def fail(sequences: list[Sequence], error: BaseException) -> None:
    """Fail the futures of ``sequences`` that are not done yet."""
    for sequence in sequences:
        try:
            if not sequence.future.done():
                sequence.future.set_exception(error)
        except concurrent.futures.InvalidStateError:
            pass
