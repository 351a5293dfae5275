"""Generated tokens/s of the embedded engine against plain `transformers.generate`, or against llama.cpp.

Run by hand: ``python bench/engine.py [--device cpu|cuda] [--model M] [--dtype auto|bf16|fp32|...] [--tokens 64]``.
``--dtype auto`` (the default) is the dtype the engine picks by itself (:mod:`evalkit.model.dtypes`); any other
value goes to the engine as it is (a weights choice the engine grows works here once it exists).
Every request is greedy and generates exactly ``--tokens`` tokens (``ignore_eos``; ``min_new_tokens``
for transformers), prompts included in the time, so rates compare like with like. For each
concurrency level it prints the engine's rate, ``transformers.generate``'s on one batch of the same
prompts (left-padded, same dtype and device) and their ratio. Defaults: concurrency 1, 8, 32 on
CPU; 1, 32, 128, 256 on CUDA. Goals: CUDA >= 3x transformers at 256 and >= 2x at 32.

``--vs-llama-cpp`` (CPU) compares with llama.cpp instead (llama-cpp-python, the optional ``bench-llama``
extra): the embedded model's own GGUF file on both sides, the same chat-templated prompt token ids, greedy,
EOS ignored on both sides; single-stream decode tok/s and time to first token, and tok/s at c = 8 and 32
(llama.cpp one request after another in this process, as ``llama_cpp.server`` serves them: its HTTP hop not
counted). Each side runs at the best of ``--threads-to-try`` for each level (probed first, printed);
then ``--rounds`` interleaved rounds (primekit, llama.cpp, primekit, ...), medians and ratios
primekit / llama.cpp. See bench/README.md.

Measured 2026-11-26 on an H100 (torch 2.11, CUDA 13, 16 cores), defaults, engine / transformers tok/s:
before the fixes below, CUDA graphs failed to capture again after the first K/V cache growth (PyTorch's
pool ``use_count`` assert) and the engine decoded eagerly: 54 / 41 (1.34x) at 1, 1,432 / 1,086 (1.32x)
at 32, 3,527 / 6,238 (0.57x) at 256. With graphs recaptured into a fresh pool: 383 (6.5x), 2,383 (1.45x),
7,836 (0.62x); the profile at 256 was then 90% prefix-cache lookups (a scan of every entry). With
lookups through block hashes: 386 (7.2x), 2,720 (1.9x), 18,172 at 128 (3.5x), 25,428 at 256 (2.4x).
The next profile put a third of the host time at 256 in per-slot prefix restores, since grouped into
one copy per layer. Until then this bench queued requests one by one, and the engine could start on the
first few alone (on CPU: 9 then 23 of 32, 24 then 232 of 256), which may explain why 32 took longer per
round than 256 there; it now queues each level in one step. Neither change has run on a GPU yet.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evalkit.core.defaults import DEFAULT_MODEL  # noqa: E402
from evalkit.core.errors import UserError  # noqa: E402
from evalkit.core.types import SamplingArgs  # noqa: E402

if TYPE_CHECKING:
    from evalkit.model.engine import Engine

TOPICS = ["the sea", "a lighthouse", "autumn", "a robot", "the moon", "a market", "rain", "a violin"]


def prompts(engine: Engine, count: int, first: int = 0) -> list[list[int]]:
    """Chat-templated prompt ids; ``first`` numbers them, so another round's prompts are not cache hits."""
    return [
        engine.encode_chat(
            [{"role": "user", "content": f"Write a short story about {TOPICS[i % len(TOPICS)]} (#{i})."}]
        )
        for i in range(first, first + count)
    ]


def ours(engine: Engine, concurrency: int, tokens: int, rounds: int) -> tuple[float, float]:
    """(wall tokens/s, tokens per CPU-second of this process) with ``concurrency`` requests
    queued together (``generate_many``, as ``transformers.generate`` gets one batch), best of ``rounds``.
    On a busy machine the second is the steadier number:
    with one thread it is what an idle core would do."""
    sampling = SamplingArgs(max_tokens=tokens, temperature=0.0, extra={"ignore_eos": True})
    batch = prompts(engine, concurrency)
    best, best_cpu = 0.0, 0.0
    for _ in range(rounds):
        start, cpu = time.perf_counter(), time.process_time()
        generated = sum(len(r.token_ids) for r in engine.generate_many(batch, sampling))
        best = max(best, generated / (time.perf_counter() - start))
        best_cpu = max(best_cpu, generated / (time.process_time() - cpu))
    return best, best_cpu


def hf_generate(model, engine: Engine, concurrency: int, tokens: int, rounds: int) -> tuple[float, float]:  # noqa: ANN001
    """Best (wall tokens/s, tokens per CPU-second) of one ``model.generate`` call over ``concurrency``
    left-padded prompts."""
    import torch

    batch = prompts(engine, concurrency)
    width = max(len(p) for p in batch)
    pad = engine.tokenizer.pad_token_id if engine.tokenizer.pad_token_id is not None else 0
    ids = torch.full((concurrency, width), pad, dtype=torch.long)
    mask = torch.zeros((concurrency, width), dtype=torch.long)
    for row, prompt in enumerate(batch):
        ids[row, width - len(prompt) :] = torch.tensor(prompt)
        mask[row, width - len(prompt) :] = 1
    ids, mask = ids.to(engine.device), mask.to(engine.device)
    best, best_cpu = 0.0, 0.0
    for _ in range(rounds):
        _sync(engine)
        start, cpu = time.perf_counter(), time.process_time()
        with torch.inference_mode():
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=tokens,
                min_new_tokens=tokens,
                do_sample=False,
                pad_token_id=pad,
            )
        _sync(engine)
        generated = (out.shape[1] - width) * concurrency
        best = max(best, generated / (time.perf_counter() - start))
        best_cpu = max(best_cpu, generated / (time.process_time() - cpu))
    return best, best_cpu


def _sync(engine: Engine) -> None:
    import torch

    if engine.device.type == "cuda":
        torch.cuda.synchronize(engine.device)


def _arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    parser.add_argument(
        "--model", default=DEFAULT_MODEL, help="any name the engine accepts (local/..., Hub id, folder)"
    )
    parser.add_argument(
        "--dtype", default="auto", help="the engine's dtype choice, passed as it is: auto (default), bf16, fp32, ..."
    )
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument(
        "--concurrency", default=None, help="comma-separated levels (default: 1,8,32 on CPU; 1,32,128,256 on CUDA)"
    )
    parser.add_argument(
        "--rounds", type=int, default=None,
        help="repeats per setting; the best is reported (default 2). --vs-llama-cpp: interleaved rounds, medians "
        "reported (default 3)",
    )  # fmt: skip
    parser.add_argument("--threads", type=int, default=None, help="fix the engine's CPU threads (default: tuned)")
    parser.add_argument("--no-hf", action="store_true", help="skip the transformers.generate baseline")
    parser.add_argument(
        "--vs-llama-cpp", action="store_true",
        help="compare with llama.cpp on the embedded model's GGUF file (CPU; needs the bench-llama extra)",
    )  # fmt: skip
    parser.add_argument(
        "--threads-to-try", default="1,2",
        help="--vs-llama-cpp: thread counts probed on each side per level, the faster kept (default 1,2)",
    )  # fmt: skip
    parser.add_argument(
        "--llama-no-extra-bufts", action="store_true",
        help="--vs-llama-cpp: llama.cpp without its extra weight buffers (repacked/AMX layouts; those crashed with "
        "SIGILL on an AMX Xeon), i.e. its plain CPU kernels",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.rounds is None:
        args.rounds = 3 if args.vs_llama_cpp else 2
    try:
        args.threads_to_try = [int(t) for t in args.threads_to_try.split(",")]
        args.levels = [int(c) for c in args.concurrency.split(",")] if args.concurrency else None
    except ValueError:
        parser.error("--threads-to-try and --concurrency take comma-separated whole numbers, e.g. 1,2")
    if args.rounds < 1 or min(args.threads_to_try) < 1 or min(args.levels or [1]) < 1 or args.tokens < 2:
        parser.error("--rounds, --threads-to-try and --concurrency take numbers >= 1, --tokens >= 2")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = _arguments(argv)
    try:
        if args.vs_llama_cpp:
            vs_llama_cpp(args)
        else:
            vs_transformers(args)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)


def vs_transformers(args: argparse.Namespace) -> None:
    import torch

    from evalkit.model.devices import resolve_device
    from evalkit.model.dtypes import choose_dtype
    from evalkit.model.engine import Engine

    device = resolve_device(args.device)
    engine_dtype = choose_dtype(args.dtype, device)
    levels = args.levels or ([1, 8, 32] if device == "cpu" else [1, 32, 128, 256])
    load = os.getloadavg()[0]
    gpu = torch.cuda.get_device_name(device) if device != "cpu" else "-"
    print(f"device={device} ({gpu}) cpus={os.cpu_count()} torch_threads={torch.get_num_threads()} "
          f"{engine_dtype.line()} "
          f"model={args.model} tokens/request={args.tokens} load_avg_1m={load:.1f}")  # fmt: skip
    if load > 1.5 and device == "cpu":
        print("note: the machine is busy; rates are lower than on an idle machine")
    if os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper().startswith("AVX2") and not os.environ.get(
        "MKL_ENABLE_INSTRUCTIONS"
    ):
        # transformers' fp32 linears run on MKL, which these two variables do not cap: without it the
        # baseline computes with AVX-512 while the engine is held to AVX2 (1.4x on prefill-sized GEMMs here)
        print("note: emulating AVX2 without MKL_ENABLE_INSTRUCTIONS=AVX2 leaves transformers.generate on AVX-512 MKL")
    engine = Engine.from_name(args.model, dtype=args.dtype, max_batch=max(levels), device=device, threads=args.threads)
    reference = None if args.no_hf else copy.deepcopy(engine.model).to(device=engine.device, dtype=engine.dtype).eval()
    print(f"engine backend: {engine.backend}; CUDA graphs: {getattr(engine, '_graphs', False)}")
    ours(engine, 2, 8, 1)  # warm-up: kernels, cache allocation
    results = {}
    for level in levels:
        results[level], per_cpu_second = ours(engine, level, args.tokens, args.rounds)
        tuner = getattr(engine, "_tuner", None)
        line = f"concurrency {level:>3}: engine {results[level]:9.1f} tok/s ({per_cpu_second:7.1f} tok per CPU-second"
        line += f"; decode threads {tuner.best})" if tuner is not None else ")"
        if reference is not None:
            baseline, baseline_cpu = hf_generate(reference, engine, level, args.tokens, args.rounds)
            line += f"   transformers.generate {baseline:9.1f} tok/s ({baseline_cpu:7.1f} per CPU-s)"
            line += f"   ratio {results[level] / baseline:5.2f} (per CPU-s {per_cpu_second / baseline_cpu:5.2f})"
        print(line, flush=True)
    engine.close()


# -- --vs-llama-cpp ------------------------------------------------------------------------------

LLAMA_EXTRA = "pip install 'primekit[bench-llama]'"


def require_llama_cpp() -> Any:
    """The ``llama_cpp`` module, or UserError saying how to get it (checked before any model loads)."""
    try:
        import llama_cpp
    except ImportError as error:
        raise UserError(
            f"--vs-llama-cpp needs llama-cpp-python ({error}); install the bench extra: {LLAMA_EXTRA} "
            "(pip builds llama.cpp from source: a C/C++ compiler and cmake; ~1 h on 2 busy cores)"
        ) from None
    return llama_cpp


@dataclass
class Run:
    """One measured run of ``requests`` requests: ``rate`` is decode tok/s for a single stream (first token
    to last, prefill excluded), tokens/s over the wall time for more; ``ttft`` (single stream) in seconds."""

    rate: float
    ttft: float | None
    token_ids: list[int]


def primekit_run(engine: Engine, batch: list[list[int]], tokens: int) -> Run:
    """The engine on ``batch``, queued in one step (``generate_many``); a single request through ``submit``
    with a token listener, for its first-token time."""
    sampling = SamplingArgs(max_tokens=tokens, temperature=0.0, extra={"ignore_eos": True})
    start = time.perf_counter()
    if len(batch) > 1:
        results = engine.generate_many(batch, sampling)
        generated = sum(len(r.token_ids) for r in results)
        return Run(generated / (time.perf_counter() - start), None, results[0].token_ids)
    stamps: list[tuple[float, int]] = []
    result = engine.submit(
        batch[0], sampling, on_tokens=lambda ids, _: stamps.append((time.perf_counter(), len(ids)))
    ).result()
    return Run(_decode_rate(stamps), stamps[0][0] - start, result.token_ids)


def llama_run(llm: Any, batch: list[list[int]], tokens: int) -> Run:
    """llama.cpp on ``batch``, one request after another (``Llama.generate``: greedy at ``temp=0``, and it
    stops only when the caller does, so EOS is ignored as on primekit's side)."""
    start = time.perf_counter()
    generated, first, stamps = 0, None, []
    for prompt in batch:
        ids: list[int] = []
        stamps = []
        for token in llm.generate(prompt, temp=0.0, repeat_penalty=1.0):
            ids.append(int(token))
            stamps.append((time.perf_counter(), 1))
            if len(ids) == tokens:
                break
        generated += len(ids)
        first = ids if first is None else first
    if len(batch) > 1:
        return Run(generated / (time.perf_counter() - start), None, first or [])
    return Run(_decode_rate(stamps), stamps[0][0] - start, first or [])


def _decode_rate(stamps: list[tuple[float, int]]) -> float:
    """Tokens after the first per second, from (time, tokens arrived) stamps."""
    after_first = sum(count for _, count in stamps[1:])
    return after_first / max(stamps[-1][0] - stamps[0][0], 1e-9)


def plain_cpu_buffers(llama_cpp: Any) -> None:
    """Every model llama-cpp-python loads from now on skips llama.cpp's extra buffer types (``use_extra_bufts``,
    which its ``Llama`` does not take as an argument: it starts from ``llama_model_default_params``)."""
    low_level = llama_cpp.llama_cpp
    default = low_level.llama_model_default_params

    def without_extra_bufts() -> Any:
        params = default()
        params.use_extra_bufts = False
        return params

    low_level.llama_model_default_params = without_extra_bufts


def llama_path(llama_cpp: Any, gguf: Path) -> tuple[str, list[str]]:
    """(llama.cpp's system-info string, its load log's buffer lines): which CPU kernels and which weight
    buffers (``CPU_REPACK``, ``AMX``: repacked layouts) it uses for this file."""
    import tempfile

    info = llama_cpp.llama_print_system_info()
    info = info.decode() if isinstance(info, bytes) else str(info)
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+") as log:
        os.dup2(log.fileno(), 2)  # llama.cpp logs from C to fd 2
        try:
            llama_cpp.Llama(model_path=str(gguf), n_ctx=256, n_threads=1, verbose=True)
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        log.seek(0)
        buffers = [line.strip() for line in log if "buffer size" in line and "model" in line]
    return info.strip(), buffers


def _kernels(info: str) -> str:
    """The widest x86 SIMD level llama.cpp's CPU backend was built for and found, from its system info."""
    on = {part.split("=")[0].strip() for part in info.split("|") if part.strip().endswith("= 1")}
    for level in ("AMX_INT8", "AVX512_BF16", "AVX512", "AVX2", "AVX", "NEON"):
        if level in on:
            return f"ggml-cpu {level} kernels"
    return "ggml-cpu scalar kernels"


def _pause() -> None:
    """Lets the other side's OpenMP workers stop spinning before a timed run."""
    time.sleep(0.3)


def _load() -> float:
    return os.getloadavg()[0]


def vs_llama_cpp(args: argparse.Namespace) -> None:
    llama_cpp = require_llama_cpp()
    import torch

    from evalkit.model.engine import Engine
    from evalkit.model.registry import KNOWN_MODELS

    if args.model != DEFAULT_MODEL or args.device != "cpu":
        raise UserError(f"--vs-llama-cpp runs {DEFAULT_MODEL}'s GGUF file on the CPU; leave --model and --device out")
    gguf = KNOWN_MODELS[DEFAULT_MODEL].require_gguf()
    levels = args.levels or [1, 8, 32]
    if args.llama_no_extra_bufts:
        plain_cpu_buffers(llama_cpp)
    info, buffers = llama_path(llama_cpp, gguf)
    print(f"cpu={_cpu_name()} cores={os.cpu_count()} torch={torch.__version__} "
          f"llama-cpp-python={getattr(llama_cpp, '__version__', '?')} load_avg_1m={_load():.1f}")  # fmt: skip
    print(f"file (both sides): {gguf}; {args.tokens} greedy tokens a request, EOS ignored; prompt token ids from "
          "primekit's chat template, fed to both")  # fmt: skip
    extra = "off (--llama-no-extra-bufts)" if args.llama_no_extra_bufts else "llama.cpp's default"
    print(f"llama.cpp path: {_kernels(info)}; extra weight buffers {extra}; system info: {info}")
    for line in buffers:
        print(f"llama.cpp weights: {line}")
    print("llama.cpp at c > 1: one request after another in this process (llama_cpp.server serves one at a time; "
          "its HTTP hop is not counted)")  # fmt: skip
    engines = {
        t: Engine.from_name(DEFAULT_MODEL, dtype=args.dtype, max_batch=max(levels), device="cpu", threads=t)
        for t in args.threads_to_try
    }
    llamas = {
        t: llama_cpp.Llama(model_path=str(gguf), n_ctx=1024, n_threads=t, n_threads_batch=t, verbose=False)
        for t in args.threads_to_try
    }
    first = next(iter(engines.values()))
    print(f"primekit: {first.dtype_choice.line()}; backend {first.backend}")
    warm = prompts(first, 2, first=10_000)
    for t in args.threads_to_try:  # kernels, caches, thread pools
        primekit_run(engines[t], warm, 8)
        llama_run(llamas[t], warm[:1], 8)
    summary = []
    numbering = iter(range(0, 10_000_000, 1_000))
    for level in levels:
        probe = prompts(first, level, next(numbering))
        mine = _best_threads("primekit", level, {t: lambda e=e: primekit_run(e, probe, args.tokens)
                                                for t, e in engines.items()})  # fmt: skip
        theirs = _best_threads("llama.cpp", level, {t: lambda m=m: llama_run(m, probe[:2], args.tokens)
                                                   for t, m in llamas.items()})  # fmt: skip
        rows: list[tuple[Run, Run]] = []
        for number in range(args.rounds):
            batch = prompts(first, level, next(numbering))
            _pause()
            ours_run = primekit_run(engines[mine], batch, args.tokens)
            _pause()
            their_run = llama_run(llamas[theirs], batch, args.tokens)
            rows.append((ours_run, their_run))
            print(f"c={level:>2} round {number + 1}/{args.rounds} (load {_load():.1f}): {_describe(ours_run, level)} "
                  f"| {_describe(their_run, level)}", flush=True)  # fmt: skip
            if level == 1 and number == 0:
                same = _common_prefix(ours_run.token_ids, their_run.token_ids)
                print(f"     greedy tokens of this prompt: the first {same} of {args.tokens} are equal on both sides")
        summary.append(_summarize(level, rows, mine, theirs))
    print(f"\nmedians of {args.rounds} interleaved rounds, ratio primekit / llama.cpp (load now {_load():.1f}):")
    for line in summary:
        print(line)
    for engine in engines.values():
        engine.close()
    for llm in llamas.values():
        llm.close()  # now, not in __del__ at interpreter exit (where it raises)


def _best_threads(side: str, level: int, runs: dict[int, Any]) -> int:
    """The thread count whose probe run was fastest (printed with every probe's rate)."""
    rates = {}
    for threads, run in runs.items():
        _pause()
        rates[threads] = run().rate
    best = max(rates, key=rates.__getitem__)
    shown = ", ".join(f"{t}: {r:.1f}" for t, r in rates.items())
    print(f"c={level:>2} {side} threads probe (tok/s by threads) {shown} -> {best}", flush=True)
    return best


def _describe(run: Run, level: int) -> str:
    if level == 1:
        return f"decode {run.rate:6.1f} tok/s, first token {run.ttft:5.2f} s"
    return f"{run.rate:6.1f} tok/s"


def _summarize(level: int, rows: list[tuple[Run, Run]], mine: int, theirs: int) -> str:
    ours_rate = statistics.median(r[0].rate for r in rows)
    their_rate = statistics.median(r[1].rate for r in rows)
    line = (f"c={level:>2}  {'decode ' if level == 1 else ''}tok/s: primekit {ours_rate:.1f} ({mine} threads), "
            f"llama.cpp {their_rate:.1f} ({theirs} threads): {ours_rate / their_rate:.2f}x")  # fmt: skip
    if level == 1:
        ours_ttft = statistics.median(r[0].ttft or 0.0 for r in rows)
        their_ttft = statistics.median(r[1].ttft or 0.0 for r in rows)
        line += (f"; first token: primekit {ours_ttft:.3f} s, llama.cpp {their_ttft:.3f} s: "
                 f"{ours_ttft / max(their_ttft, 1e-9):.2f}x (lower is better)")  # fmt: skip
    return line


def _common_prefix(a: list[int], b: list[int]) -> int:
    same = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        same += 1
    return same


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip().replace(" ", "_")
    except OSError:
        pass
    return "?"


if __name__ == "__main__":
    main()
