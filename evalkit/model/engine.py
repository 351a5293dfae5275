"""The in-process batching engine: many concurrent requests, one batched forward per step.

Requests are queued from any thread or event loop; one worker thread owns the model and runs
continuous batching (:mod:`evalkit.model.scheduler`): it admits queued requests into free slots
(up to ``max_batch``), prefills them together, then decodes one token for every live sequence in
a single forward pass over a per-slot KV cache. Finished sequences leave between steps and their
slots are reused at once, so short and long requests do not wait for each other.

Two forwards behind that one worker: the fused Llama-family path
(:class:`~evalkit.model.forward.LlamaForward`) and, for every other ``AutoModelForCausalLM``, the
Hugging Face fallback (:class:`~evalkit.model.hf_forward.HFForward`). On CPU or CUDA; on CUDA
the fused path's decode steps replay CUDA graphs and the host synchronises once per window of steps.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import secrets
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from evalkit.core.errors import UserError
from evalkit.core.types import Message, SamplingArgs
from evalkit.model.chat_format import encode_chat
from evalkit.model.devices import resolve_device
from evalkit.model.dtypes import AUTO, DENSE, Q4, choose_dtype
from evalkit.model.loading import log, open_model
from evalkit.model.registry import GgufModel, LocalDirModel, ModelSource, resolve_model, stores_q4
from evalkit.model.requests import GenerationResult, InvalidRequest, SamplingParams, check_params, sampling_params
from evalkit.model.scheduler import Finisher, Limits, Scheduler, TokenListener, fail
from evalkit.model.scheduler import Sequence as ScheduledSequence
from evalkit.model.tensors import StoredModel, model_config
from evalkit.model.threads import ThreadTuner

BACKENDS = ("auto", "fused", "hf")
CUDA_WINDOW = 16
"""Decode steps between host synchronisations on CUDA (on CPU: 1)."""
CUDA_KV_SHARE = 0.5
"""Share of the GPU memory free after loading that the KV cache may plan for, by default."""
PREFIX_CACHE_GB = 1.0
"""Default bound on the prefix cache's K/V (CPU; on CUDA the smaller of this and a tenth of the free memory)."""


class EngineError(RuntimeError):
    """The engine failed a request for a reason that is not the request's fault (or it was closed)."""


@dataclass
class _WeightUpdate:
    state_dict: Mapping[str, torch.Tensor] | None
    drain: bool
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


def build_forward(
    model: Any,
    dtype: torch.dtype,
    device: torch.device,
    backend: str = "auto",
    batch_hint: int = 32,
    weights: str = DENSE,
) -> Any:
    """The forward the engine runs ``model`` (a module or a :class:`StoredModel`) with: fused when
    the architecture allows (``auto``) or when asked (``fused``, a UserError if it cannot), else
    the Hugging Face fallback (which runs the module, so a stored model builds it). ``weights="q4"``
    (4-bit decoder linears) needs the fused path: a UserError where it cannot run."""
    from evalkit.model.weights import fused_unsupported

    if backend not in BACKENDS:
        raise UserError(f"unknown engine backend '{backend}' (use {', '.join(BACKENDS)})")
    reason = fused_unsupported(model) if backend != "hf" else "asked for"
    if reason is None:
        from evalkit.model.forward import LlamaForward

        return LlamaForward(model, dtype, device, batch_hint, weights)
    if weights == Q4:
        why = "the hf backend was asked for" if backend == "hf" else f"the fused path cannot run this model: {reason}"
        raise UserError(f"dtype q4 runs on the fused engine path only ({why}); use auto, bf16 or fp32")
    if backend == "fused":
        raise UserError(f"the fused engine path cannot run this model ({reason}); use backend 'auto' or 'hf'")
    from evalkit.model.hf_forward import HFForward

    if backend == "auto":
        log(
            f"note: running {getattr(model_config(model), 'model_type', 'this model')} through the Hugging Face "
            f"forward (fused path: {reason})"
        )
    return HFForward(model.module() if isinstance(model, StoredModel) else model, dtype, device)


class Engine:
    """Serves one causal LM to many concurrent callers, on CPU or CUDA.

    Construction: ``Engine(model, tokenizer, dtype="auto", max_batch=32, device="auto")`` from
    any ``AutoModelForCausalLM`` (peft-wrapped or holding LoRA layers is fine) and its tokenizer,
    or :meth:`from_name` for ``local/smollm2-135m``, a Hub id or a model folder. The engine keeps
    ``model`` as the *master copy* (``engine.model``, ``engine.tokenizer``) and samples from its
    own snapshot of the effective weights in ``dtype`` on ``device``. :meth:`from_name` reads that
    snapshot straight from the folder's safetensors (a :class:`~evalkit.model.tensors.StoredModel`)
    and builds the transformers module only when ``engine.model`` is first used (a weight update,
    the Hugging Face fallback); serving alone never builds it. Fused for Llama-family models
    (``backend="auto"`` or ``"fused"``), a plain module copy run by the Hugging Face forward for the
    rest (``"hf"``). ``engine.backend`` says which. ``dtype="auto"`` is bf16 on CUDA and on CPUs with
    native bf16, else fp32 (:mod:`evalkit.model.dtypes`), and on CPU ``q4`` (4-bit decoder linears,
    :mod:`evalkit.model.quant`) for a model file that stores its linears as 4-bit blocks (:meth:`from_name`);
    ``dtype="q4"`` asks for it. ``engine.dtype_choice`` says which and why.

    Device: ``"auto"`` is CUDA when torch sees a GPU, else CPU; ``"cpu"``, ``"cuda"``, ``"cuda:N"``.
    On CUDA, ``window`` decode steps run between host synchronisations (default 16) and, on the fused
    path, replay CUDA graphs (``graphs=False`` runs them eagerly). ``bucketed=True`` runs the graphs'
    fixed row/length buckets without capturing (how CPU tests exercise that layout).

    Weight-update contract (the RL trainer's side):

    * The trainer may train ``engine.model`` (or a peft model wrapping it) in place; the engine
      does not see those changes until :meth:`update_weights` is called.
    * ``update_weights()`` re-snapshots ``engine.model`` (LoRA deltas merged in);
      ``update_weights(state_dict)`` first loads ``state_dict`` into ``engine.model`` (keys as in
      ``engine.model.state_dict()``, partial allowed, unknown keys refused).
    * With ``drain=True`` (default) the engine stops admitting requests, lets the sequences in
      flight finish on the old weights, swaps, and resumes: every result is generated by exactly
      one weight version, reported as ``GenerationResult.weights_version``. ``drain=False`` swaps
      between two decode windows without waiting (sequences in flight continue on the new weights).
    * It blocks until the swap is done and returns the new version; call it from a thread other
      than an event loop serving requests (or use :meth:`aupdate_weights`), and not while your own
      optimizer step is mutating the module.

    Threads (CPU): ``threads=None`` lets the worker choose its intra-op thread count by measured
    step time (see :mod:`evalkit.model.threads`); an int fixes it. :meth:`share_cpu` caps it for a
    while (another thread of the process needs the other cores).

    Memory: the KV cache grows with the live batch; new requests wait in the queue when admitting
    them could push it past ``kv_cache_gb`` (counting every sequence at its ``max_tokens``; default
    4 GB on CPU, half the GPU memory left free after loading on CUDA).

    Prefix reuse (:mod:`evalkit.model.prefix_cache`): the K/V of prompts and finished sequences are
    kept, so a request that starts with tokens the engine has seen (the conversation's previous
    turn, a group's shared prompt) prefills only the rest. They take at most ``prefix_cache_gb``
    (default 1 GB; on CUDA at most a tenth of the free memory) on top of the KV cache, least recently
    used evicted first; ``prefix_cache_gb=0`` turns reuse off. A weight update empties it.
    :meth:`prefix_stats` counts prompt tokens prefilled and reused.

    Requests: :meth:`submit` (thread-safe, returns a ``concurrent.futures.Future``; cancelling it
    drops the sequence from the batch), :meth:`generate` (async) and :meth:`generate_many`
    (blocking). Bad requests raise :class:`~evalkit.model.requests.InvalidRequest` at submission.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        dtype: str = AUTO,
        max_batch: int = 32,
        name: str | None = None,
        threads: int | None = None,
        kv_cache_gb: float | None = None,
        device: str = "auto",
        backend: str = "auto",
        window: int | None = None,
        graphs: bool | None = None,
        bucketed: bool = False,
        prefix_cache_gb: float | None = None,
    ):
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._model = model
        self.tokenizer = tokenizer
        self.name = name or str(getattr(model_config(model), "_name_or_path", "model"))
        self.device = torch.device(resolve_device(device))
        self.dtype_choice = choose_dtype(dtype, str(self.device))
        self.dtype_name = self.dtype_choice.name
        self.dtype = getattr(torch, self.dtype_name)
        self.max_batch = max_batch
        self.weights_version = 0
        with torch.no_grad():
            self._forward = build_forward(
                model, self.dtype, self.device, backend, max_batch, self.dtype_choice.weights
            )
        if isinstance(model, StoredModel):
            model.release()  # the snapshot holds copies; the mapped file is not needed any more
        self.backend: str = self._forward.name
        self.vocab_size = self._forward.vocab_size
        self.context_length = self._forward.cache_shape.max_positions
        self.stop_token_ids = _stop_token_ids(tokenizer, model)
        cuda = self.device.type == "cuda"
        self._limits = Limits(
            max_batch=max_batch,
            kv_budget_bytes=(kv_cache_gb if kv_cache_gb is not None else _default_kv_gb(self.device)) * 2**30,
            prefill_tokens=16384 if cuda else 4096,
            window=max(1, window if window is not None else (CUDA_WINDOW if cuda else 1)),
            prefix_bytes=(prefix_cache_gb if prefix_cache_gb is not None else _default_prefix_gb(self.device)) * 2**30,
        )
        self._graphs = cuda and self._forward.graph_safe and graphs is not False
        self._bucketed = bucketed
        self._threads = threads
        self._tuner: ThreadTuner | None = None
        self.thread_cap: int | None = None
        """The most intra-op threads the CPU worker may use from its next step (:meth:`share_cpu`)."""
        self._scheduler: Scheduler | None = None
        self._cond = threading.Condition()
        self._pending: deque[ScheduledSequence] = deque()
        self._update: _WeightUpdate | None = None
        self._score_lock = threading.Lock()
        """One scoring forward at a time on the master copy (:meth:`score`)."""
        self._closed = False
        self._admitting: list[ScheduledSequence] = []
        """Sequences the worker took from the queue and is prefilling (in neither the queue nor the batch)."""
        self._thread = threading.Thread(target=self._run, name=f"primekit-engine-{self.name}", daemon=True)
        self._thread.start()

    @classmethod
    def from_name(
        cls, name: str | ModelSource | None = None, *, dtype: str = AUTO, max_batch: int = 32, **options: Any
    ) -> Engine:
        """Load ``name`` (see :mod:`evalkit.model.registry`), converting the GGUF on first use;
        ``options`` are the constructor's (``device``, ``backend``, ``threads``, ``kv_cache_gb``, ...)."""
        source = name if isinstance(name, (GgufModel, LocalDirModel)) else resolve_model(name)
        device = resolve_device(options.pop("device", "auto"))
        choice = choose_dtype(dtype, device, q4_file=stores_q4(source))
        log(f"loading {source.name} on {device}, {choice.line()}...")
        model, tokenizer = open_model(source, choice.name)  # a serving engine's master needs no float32
        engine = cls(
            model, tokenizer, dtype=choice.spelling, max_batch=max_batch, name=source.name, device=device, **options
        )
        engine.dtype_choice = choice  # keep the reason (auto's), not "asked for"
        return engine

    @property
    def model(self) -> Any:
        """The master copy: the module the engine was given, or, for an engine loaded from a model
        folder (:meth:`from_name`), that folder's transformers module, built on first access."""
        return self._model.module() if isinstance(self._model, StoredModel) else self._model

    # -- requests -------------------------------------------------------------------------------

    def encode_chat(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> list[int]:
        """Prompt token ids of a chat (the model's chat template, generation prompt appended).

        ``template_kwargs`` reach the template as variables (``enable_thinking``, ``reasoning_effort``);
        a template that does not read one ignores it."""
        return encode_chat(self.tokenizer, messages, tools, template_kwargs)

    def submit(self, prompt_ids: Sequence[int], sampling: SamplingArgs | SamplingParams | None = None, *,
               on_tokens: TokenListener | None = None) -> concurrent.futures.Future:
        """Queue one generation; the future resolves to a :class:`GenerationResult`.

        Raises :class:`InvalidRequest` now for a request that cannot succeed. ``on_tokens(ids,
        logprobs)`` (what streaming needs) is called on the worker thread with each increment of
        sampled tokens, the last one before the future resolves; it must return quickly, and if it
        raises, this request fails with that exception.
        """
        sequence = self._sequence(prompt_ids, sampling, on_tokens)
        self._enqueue([sequence])
        return sequence.future

    def _sequence(self, prompt_ids: Sequence[int], sampling: SamplingArgs | SamplingParams | None,
                  on_tokens: TokenListener | None) -> ScheduledSequence:
        """A checked request, not yet queued (raises :class:`InvalidRequest`)."""
        prompt = [int(t) for t in prompt_ids]
        if isinstance(sampling, SamplingParams):
            params = sampling
            check_params(params, len(prompt), self.context_length)
        else:
            params = sampling_params(sampling, len(prompt), self.context_length)
        if any(t < 0 or t >= self.vocab_size for t in prompt):
            raise InvalidRequest(f"prompt token ids must be in [0, {self.vocab_size})")
        seed = params.seed if params.seed is not None else secrets.randbits(63)
        future: concurrent.futures.Future = concurrent.futures.Future()
        return ScheduledSequence(
            prompt, params, future, seed=_int64(seed), submitted=time.perf_counter(), on_tokens=on_tokens
        )

    def _enqueue(self, sequences: list[ScheduledSequence]) -> None:
        """Queue ``sequences`` in one step, so the worker admits them into the same round."""
        with self._cond:
            if self._closed:
                raise EngineError("the engine is closed")
            self._pending.extend(sequences)
            self._cond.notify_all()

    async def generate(
        self, prompt_ids: Sequence[int], sampling: SamplingArgs | SamplingParams | None = None
    ) -> GenerationResult:
        """Async :meth:`submit`; cancelling the awaiting task drops the request from the batch."""
        return await asyncio.wrap_future(self.submit(prompt_ids, sampling))

    def generate_many(
        self, prompts: Sequence[Sequence[int]], sampling: SamplingArgs | SamplingParams | None = None
    ) -> list[GenerationResult]:
        """Blocking: all ``prompts`` queued in one step (so they are admitted together; one by one,
        the worker could start on the first few alone), results in order."""
        sequences = [self._sequence(p, sampling, None) for p in prompts]
        self._enqueue(sequences)
        return [s.future.result() for s in sequences]

    def score(self, token_ids: Sequence[int], top: int = 0) -> list[Any]:
        """Each given token's log-probability after the ones before it (vLLM's ``prompt_logprobs``;
        :func:`evalkit.model.scoring.score_tokens`), from the master copy, on the calling thread (blocking: call it
        from a worker thread). Raises :class:`InvalidRequest` for ids outside the vocabulary or the context."""
        from evalkit.model.scoring import score_tokens

        ids = [int(t) for t in token_ids]
        if any(t < 0 or t >= self.vocab_size for t in ids):
            raise InvalidRequest(f"prompt token ids must be in [0, {self.vocab_size})")
        if len(ids) > self.context_length:
            raise InvalidRequest(f"the prompt has {len(ids)} tokens, over the context window of {self.context_length}")
        with self._score_lock:
            return score_tokens(self.model, ids, top)

    # -- weights ---------------------------------------------------------------------------------

    def update_weights(
        self, state_dict: Mapping[str, torch.Tensor] | None = None, *, drain: bool = True, timeout: float | None = None
    ) -> int:
        """Swap in new weights between decode windows (see the class docstring); returns the version."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("update_weights cannot be called from the engine's own thread")
        update = _WeightUpdate(state_dict, drain)
        with self._cond:
            while self._update is not None and not self._closed:
                self._cond.wait()
            if self._closed:
                raise EngineError("the engine is closed")
            self._update = update
            self._cond.notify_all()
        if not update.done.wait(timeout):
            raise TimeoutError(f"weight update not applied within {timeout} s")
        if update.error is not None:
            raise update.error
        return self.weights_version

    async def aupdate_weights(self, state_dict: Mapping[str, torch.Tensor] | None = None, *, drain: bool = True) -> int:
        """:meth:`update_weights` without blocking the event loop."""
        return await asyncio.to_thread(self.update_weights, state_dict, drain=drain)

    def _apply_update(self, update: _WeightUpdate) -> None:
        cuda = self.device.type == "cuda"
        try:
            if cuda:  # the trainer's kernels that wrote the master copy finish before we read it
                torch.cuda.current_stream(self.device).wait_stream(torch.cuda.default_stream(self.device))
            with torch.no_grad():
                if update.state_dict is not None:
                    unknown = sorted(set(update.state_dict) - set(self.model.state_dict()))
                    if unknown:  # checked first, so a refused update leaves the module untouched
                        raise KeyError(f"state dict keys not in the model: {unknown[:5]}")
                    self.model.load_state_dict(dict(update.state_dict), strict=False)
                self._forward.load(self.model)
                if self._scheduler is not None:  # K/V of the old weights must not be reused, nor saved again
                    self._scheduler.prefixes.new_weights()
            if cuda:  # and ours finish reading it before the trainer may write it again
                torch.cuda.current_stream(self.device).synchronize()
            self.weights_version += 1
        except BaseException as exc:  # reported to the caller of update_weights, never kills the worker
            update.error = exc
        finally:
            with self._cond:
                self._update = None
                self._cond.notify_all()
            update.done.set()

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self, *, wait: bool = True, timeout: float = 30.0) -> bool:
        """Stop the worker; requests still queued, being prefilled or running fail with
        :class:`EngineError` at once (the worker itself stops at the end of its current step, which a
        long prefill can make seconds away). ``wait`` joins the worker for up to ``timeout`` s.
        Safe to call from a signal handler with ``wait=False``. Returns whether the worker has stopped."""
        scheduler = self._scheduler
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            held = [*self._pending, *self._admitting, *(scheduler.active if scheduler is not None else ())]
        fail(held, EngineError("the engine was closed"))
        if wait and threading.current_thread() is not self._thread:
            self._thread.join(timeout=timeout)
        return not self._thread.is_alive()

    def share_cpu(self, threads: int | None) -> None:
        """Decode with at most ``threads`` intra-op threads from the worker's next step on (``None``:
        all of them again). For a caller that runs its own torch work beside generation on the same
        cores (the RL trainer): each side then has its own cores instead of both oversubscribing all.
        No effect on CUDA."""
        self.thread_cap = None if threads is None else max(1, threads)

    @property
    def closed(self) -> bool:
        return self._closed

    def load(self) -> dict[str, int]:
        """``{"requests_running": ..., "requests_waiting": ...}`` right now (approximate: read
        without the worker's lock)."""
        scheduler = self._scheduler
        running = (len(scheduler.active) if scheduler is not None else 0) + len(self._admitting)  # prefilling runs too
        return {"requests_running": running, "requests_waiting": len(self._pending)}

    def prefix_stats(self) -> dict[str, int]:
        """Prompt tokens submitted so far, how many were prefilled and how many reused from the prefix
        cache, and the cache's current size (approximate: read without the worker's lock)."""
        scheduler = self._scheduler
        if scheduler is None:
            return {"prompt_tokens": 0, "prefilled_tokens": 0, "reused_tokens": 0, "cache_bytes": 0, "entries": 0}
        stats = scheduler.prefixes.stats
        return {"prompt_tokens": stats.prompt_tokens, "prefilled_tokens": stats.prefilled_tokens,
                "reused_tokens": stats.reused_tokens, "cache_bytes": scheduler.prefixes.nbytes,
                "entries": len(scheduler.prefixes.entries)}  # fmt: skip

    # -- the worker --------------------------------------------------------------------------------

    def _run(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
            # the engine's own stream, so generation can overlap a trainer's kernels on the same GPU
            torch.cuda.set_stream(torch.cuda.Stream(self.device))
            torch.cuda.current_stream(self.device).wait_stream(
                torch.cuda.default_stream(self.device)
            )  # the snapshot copies
        else:
            if self._threads:
                torch.set_num_threads(self._threads)
            self._tuner = ThreadTuner(self._threads, adaptive=self._threads is None)
        finisher = Finisher(self.tokenizer, self.stop_token_ids, lambda: self.weights_version)
        scheduler = Scheduler(
            self._forward,
            self.dtype,
            self._limits,
            finisher,
            graphs=self._graphs,
            bucketed=self._bucketed,
            tuner=self._tuner,
        )
        self._scheduler = scheduler
        while True:
            work = self._next_round(scheduler)
            if work is None:
                return
            admitted, update = work
            if self._tuner is not None:
                self._tuner.limit(self.thread_cap)  # cheap when unchanged
            if update is not None:
                self._apply_update(update)
                continue
            self._admitting = admitted
            try:
                with torch.inference_mode():
                    if admitted:
                        scheduler.prefill(admitted)
                    if scheduler.active:
                        scheduler.decode()
            except Exception as exc:  # a bug or out-of-memory: fail this batch, keep serving
                scheduler.fail_all(EngineError(f"generation failed: {type(exc).__name__}: {exc}"), admitted)
            finally:
                self._admitting = []
            scheduler.trim()

    def _next_round(self, scheduler: Scheduler) -> tuple[list[ScheduledSequence], _WeightUpdate | None] | None:
        """Wait for work; then (requests to admit, ``None``) or ([], a weight update to apply now).
        ``None`` when the engine closed (everything still queued or running has been failed)."""
        with self._cond:
            while not (self._closed or self._pending or scheduler.active or self._update):
                self._cond.wait()
            if self._closed:
                scheduler.fail_all(EngineError("the engine was closed"), list(self._pending))
                self._pending.clear()
                if self._update is not None:
                    self._update.error = EngineError("the engine was closed before the weight update")
                    self._update.done.set()
                return None
            update = self._update
            if update is not None and (not update.drain or not scheduler.active):
                return [], update
            return (scheduler.admit(self._pending) if update is None else []), None


def _default_kv_gb(device: torch.device) -> float:
    if device.type != "cuda":
        return 4.0
    free, _total = torch.cuda.mem_get_info(device)
    return CUDA_KV_SHARE * free / 2**30


def _default_prefix_gb(device: torch.device) -> float:
    if device.type != "cuda":
        return PREFIX_CACHE_GB
    free, _total = torch.cuda.mem_get_info(device)
    return min(PREFIX_CACHE_GB, 0.1 * free / 2**30)


def _int64(seed: int) -> int:
    """Any integer seed folded into int64 (so a huge JSON seed is still a valid, distinct seed)."""
    seed %= 2**64
    return seed - 2**64 if seed >= 2**63 else seed


def _stop_token_ids(tokenizer: Any, model: Any) -> frozenset[int]:
    """EOS ids from the tokenizer and the generation config, plus ``<|im_end|>`` / ``<|endoftext|>``."""
    ids: set[int] = set()
    for value in (tokenizer.eos_token_id, getattr(getattr(model, "generation_config", None), "eos_token_id", None)):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    for token in ("<|im_end|>", "<|endoftext|>"):
        token_id = tokenizer.convert_tokens_to_ids(token)
        if isinstance(token_id, int) and token_id != tokenizer.unk_token_id:
            ids.add(token_id)
    return frozenset(ids)
