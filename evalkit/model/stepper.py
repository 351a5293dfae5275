"""Decode steps back to back on the device, the host checking in every few steps.

:class:`SlotState` keeps, per KV-cache slot, everything a decode step reads (last token, its
position, sampling settings, seed, token counter) as device tensors, and a small history of what
the last steps sampled. :class:`DecodeStepper` runs one step as forward + sampling + advancing that
state, entirely on the device: the host only learns the tokens when it calls :meth:`collect`
(one synchronisation per window of steps, not per token).

On CUDA each step is replayed from a captured CUDA graph, one per (row bucket, attended length,
sampling mode, cache allocation). A batch of ``B`` live sequences runs in the smallest row bucket
``>= B``; the extra rows are free slots parked at position 0, whose results nobody reads. On CPU
the same step function runs eagerly with exact row counts, so tests exercise the same state
handling, indexing and sampling the graphs capture.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from evalkit.model.kvcache import KVCache
from evalkit.model.loading import log
from evalkit.model.requests import SamplingParams
from evalkit.model.sampling import RowSettings, SamplingMode, row_tensors, sample


def row_buckets(limit: int) -> list[int]:
    """Row counts graphs are captured for: 1, 2, 3, 4, 6, 8, 12, ... (at most a third is padding)."""
    buckets, size = [], 1
    while size < limit:
        buckets.append(size)
        if size >= 2 and size + size // 2 < limit:
            buckets.append(size + size // 2)
        size *= 2
    buckets.append(limit)
    return sorted(set(buckets))


def attend_length(needed: int, capacity: int, bucketed: bool) -> int:
    """How many key positions a decode step attends to when the longest sequence needs ``needed``.

    Bucketed (CUDA graphs): the next power of two from 64, within the capacity. Eager (CPU): what
    is needed. Decode attention reads every attended K/V row, and on a CPU that read is bound by
    memory bandwidth: attending a 128-position allocation where 72 are needed made an fp32 step at
    32 rows ~6% slower on AVX2 kernels (the strided slice is multiplied in place, not copied; bf16
    on AMX measured the same either way)."""
    if bucketed:
        length = 64
        while length < needed:
            length *= 2
        return min(length, capacity)
    return min(needed, capacity)


class SlotState:
    """Per-slot decode inputs and the last steps' outputs, on one device."""

    def __init__(self, slots: int, window: int, device: torch.device):
        self.device = device
        self.window = window

        def zeros(*shape: int, dtype: torch.dtype = torch.long) -> torch.Tensor:
            return torch.zeros(shape, dtype=dtype, device=device)

        self.tokens, self.positions, self.seeds, self.counters, self.top_k = (zeros(slots) for _ in range(5))
        self.temperature, self.min_p = zeros(slots, dtype=torch.float32), zeros(slots, dtype=torch.float32)
        self.top_p = torch.ones(slots, dtype=torch.float32, device=device)
        self.penalty = torch.ones(slots, dtype=torch.float32, device=device)
        self.seen: torch.Tensor | None = None
        """bool ``[slots, vocab]``: the tokens each slot's prompt and completion hold (allocated by the first
        request with a repetition penalty, then kept: captured graphs point at it)."""
        self.out_tokens = zeros(slots, window)
        self.out_logprobs = zeros(slots, window, dtype=torch.float32)
        self.column = zeros(1)
        """The history column the next step writes (a device scalar, so graphs can advance it)."""

    def tensors(self) -> list[torch.Tensor]:
        seen = [self.seen] if self.seen is not None else []
        return [self.tokens, self.positions, self.seeds, self.counters, self.top_k, self.temperature,
                self.top_p, self.min_p, self.penalty, *seen, self.out_tokens, self.out_logprobs,
                self.column]  # fmt: skip

    def settings(self, rows: slice) -> RowSettings:
        return RowSettings(self.temperature[rows], self.top_k[rows], self.top_p[rows], self.min_p[rows],
                           self.penalty[rows], self.seen[rows] if self.seen is not None else None)  # fmt: skip

    def configure(
        self,
        first: int,
        params: Sequence[SamplingParams],
        seeds: Sequence[int],
        prompts: Sequence[Sequence[int]],
        vocab: int,
    ) -> None:
        """Sampling settings, seeds and (with a repetition penalty) the prompt tokens seen, of new
        sequences in slots ``first, first + 1, ...``."""
        rows = slice(first, first + len(params))
        settings = row_tensors(params, self.device)
        for name in ("temperature", "top_k", "top_p", "min_p", "penalty"):
            getattr(self, name)[rows] = getattr(settings, name)
        self.seeds[rows] = torch.tensor(list(seeds), dtype=torch.long, device=self.device)
        self.counters[rows] = 0
        if any(p.penalized for p in params) and self.seen is None:
            self.seen = torch.zeros((self.tokens.shape[0], vocab), dtype=torch.bool, device=self.device)
        if self.seen is not None:
            self.seen[rows] = False
            for offset, (p, prompt) in enumerate(zip(params, prompts)):
                if p.penalized:
                    self.seen[first + offset, torch.tensor(list(prompt), dtype=torch.long, device=self.device)] = True

    def mark_seen(self, rows: int, tokens: torch.Tensor) -> None:
        """Sampled ``tokens`` (one per slot ``0..rows-1``) join what the repetition penalty looks at."""
        if self.seen is not None:
            self.seen[:rows].scatter_(1, tokens[:, None], True)

    def start(self, first: int, tokens: torch.Tensor, positions: Sequence[int]) -> None:
        """After prefill: each new slot's first sampled token sits at the end of its prompt."""
        rows = slice(first, first + tokens.shape[0])
        self.tokens[rows] = tokens
        self.positions[rows] = torch.tensor(list(positions), dtype=torch.long, device=self.device)
        self.counters[rows] = 1

    def record(self, rows: int, tokens: torch.Tensor, logprobs: torch.Tensor) -> None:
        """One step's results: into the history, and as the next step's input."""
        self.out_tokens[:rows].index_copy_(1, self.column, tokens[:, None])
        self.out_logprobs[:rows].index_copy_(1, self.column, logprobs[:, None])
        self.tokens[:rows].copy_(tokens)
        self.positions[:rows].add_(1)
        self.counters[:rows].add_(1)
        self.column.add_(1)

    def move(self, sources: Sequence[int], targets: Sequence[int]) -> None:
        """Slot ``sources[i]``'s state becomes slot ``targets[i]``'s (batch compaction)."""
        if not sources:
            return
        src = torch.tensor(list(sources), device=self.device)
        dst = torch.tensor(list(targets), device=self.device)
        seen = [self.seen] if self.seen is not None else []
        for tensor in (self.tokens, self.positions, self.seeds, self.counters, self.top_k, self.temperature, self.top_p,
                       self.min_p, self.penalty, *seen):  # fmt: skip
            tensor[dst] = tensor[src]

    def park(self, live: int) -> None:
        """Reset the free slots ``live..`` to position 0 (padding rows of a graph bucket write there)."""
        for tensor in (self.tokens, self.positions, self.counters, self.temperature, self.top_k, self.min_p):
            tensor[live:] = 0
        self.penalty[live:] = 1.0


class DecodeStepper:
    """Runs decode steps of ``forward`` over ``cache`` and ``state``; CUDA graphs when ``graphs``.

    ``bucketed`` (implied by ``graphs``) runs steps in the graphs' fixed row and length buckets;
    on CPU it exists so tests can run the graph path's layout without capturing."""

    def __init__(
        self, forward: Any, cache: KVCache, state: SlotState, *, graphs: bool, max_rows: int, bucketed: bool = False
    ):
        self.forward = forward
        self.cache = cache
        self.state = state
        self.graphs = graphs
        self.bucketed = graphs or bucketed
        self.buckets = row_buckets(max_rows)
        self._captured: dict[tuple[Any, ...], Any] = {}
        self._generation = -1
        self._pool = torch.cuda.graph_pool_handle() if graphs else None

    def rows(self, batch: int) -> int:
        """The rows a step for ``batch`` live sequences computes (its graph bucket)."""
        return next(b for b in self.buckets if b >= batch) if self.bucketed else batch

    def step(self, batch: int, length: int, mode: SamplingMode) -> None:
        """One decode step for slots ``0..batch-1`` attending ``length`` keys; nothing is synchronised."""
        rows = self.rows(batch)
        if not self.graphs:
            self._step(rows, length, mode)
            return
        if self._generation != self.cache.generation:
            self.reset()  # the cache was reallocated: every captured pointer is stale
            self._generation = self.cache.generation
        key = (rows, length, mode)
        graph = self._captured.get(key)
        if graph is None:
            try:
                graph = self._captured[key] = self._capture(rows, length, mode)
            except Exception as exc:  # noqa: BLE001 - a model or driver that cannot be captured: run eagerly
                log(f"note: CUDA graph capture failed ({type(exc).__name__}: {exc}); decoding without graphs")
                self.reset()
                self.graphs = False
                self._step(rows, length, mode)
                return
        graph.replay()

    def collect(self, batch: int, steps: int) -> tuple[list[list[int]], list[list[float]]]:
        """The tokens and logprobs the last ``steps`` steps sampled for slots ``0..batch-1`` (this
        is where the host waits for the device); the history starts over."""
        tokens = self.state.out_tokens[:batch, :steps].tolist()
        logprobs = self.state.out_logprobs[:batch, :steps].tolist()
        self.state.column.zero_()
        return tokens, logprobs

    def reset(self) -> None:
        """Forget every captured graph, and capture the next ones into a new memory pool: once a
        pool's graphs are all gone it can still hold cached blocks, and PyTorch refuses to capture
        into such a pool again (``use_count > 0`` internal assert, seen on an H100 with torch 2.11,
        which silently cost the engine its graphs after the first cache growth)."""
        self._captured.clear()
        if self.graphs:
            self._pool = torch.cuda.graph_pool_handle()

    def _step(self, rows: int, length: int, mode: SamplingMode) -> None:
        s = self.state
        logits = self.forward.decode(self.cache, s.tokens[:rows], s.positions[:rows], length)
        tokens, logprobs = sample(logits, s.settings(slice(0, rows)), s.seeds[:rows], s.counters[:rows], mode)
        if mode.penalized:
            s.mark_seen(rows, tokens)
        s.record(rows, tokens, logprobs)

    def _capture(self, rows: int, length: int, mode: SamplingMode) -> Any:
        """Warm up once on a side stream (state restored after, so the warm-up leaves no trace but
        K/V it rewrites identically), then capture one step into a graph sharing one memory pool."""
        saved = [t.clone() for t in self.state.tensors()]
        current = torch.cuda.current_stream(self.state.device)
        side = torch.cuda.Stream(self.state.device)
        side.wait_stream(current)
        with torch.cuda.stream(side):
            self._step(rows, length, mode)
        current.wait_stream(side)
        for tensor, value in zip(self.state.tensors(), saved):
            tensor.copy_(value)
        graph = torch.cuda.CUDAGraph()
        # thread_local: CUDA work other threads do meanwhile (a trainer sharing the GPU) does not
        # invalidate this capture
        with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
            self._step(rows, length, mode)
        return graph
