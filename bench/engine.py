"""Generated tokens/s of the embedded engine at concurrency 1, 8 and 32, against llama.cpp.

Run by hand: ``python bench/engine.py [--dtype bf16|fp32] [--tokens 64]``. Every request is greedy
and generates exactly ``--tokens`` tokens (``ignore_eos``), so rates compare like with like.
llama-cpp-python (optional, never a dependency) runs the same GGUF single-stream with EOS banned
by logit bias. The ratio that matters: ours at 32 concurrent / llama.cpp single stream (goal >= 3).
llama-cpp-python ships only as an sdist on PyPI; on the 2-core dev box its C++ build did not finish
within 8 minutes (twice), so the comparison there rests on DESIGN.md's measured ~115 tok/s.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evalkit.model.engine import Engine  # noqa: E402
from evalkit.model.registry import DEFAULT_MODEL, KNOWN_MODELS  # noqa: E402
from evalkit.types import SamplingArgs  # noqa: E402

TOPICS = ["the sea", "a lighthouse", "autumn", "a robot", "the moon", "a market", "rain", "a violin"]


def prompts(engine: Engine, count: int) -> list[list[int]]:
    return [
        engine.encode_chat([{"role": "user", "content": f"Write a short story about {TOPICS[i % len(TOPICS)]} (#{i})."}])
        for i in range(count)
    ]


def ours(engine: Engine, concurrency: int, tokens: int, rounds: int) -> tuple[float, float]:
    """(wall tokens/s, tokens per CPU-second of this process) with ``concurrency`` requests
    submitted together, best of ``rounds``. On a busy machine the second is the steadier number:
    with one thread it is what an idle core would do."""
    sampling = SamplingArgs(max_tokens=tokens, temperature=0.0, extra={"ignore_eos": True})
    batch = prompts(engine, concurrency)
    best, best_cpu = 0.0, 0.0
    for _ in range(rounds):
        start, cpu = time.perf_counter(), time.process_time()
        futures = [engine.submit(p, sampling) for p in batch]
        generated = sum(len(f.result().token_ids) for f in concurrent.futures.as_completed(futures))
        best = max(best, generated / (time.perf_counter() - start))
        best_cpu = max(best_cpu, generated / (time.process_time() - cpu))
    return best, best_cpu


def llama_cpp(engine: Engine, tokens: int, rounds: int, threads: int) -> float | None:
    try:
        from llama_cpp import Llama
    except ImportError:
        return None
    gguf = KNOWN_MODELS[DEFAULT_MODEL].require_gguf()
    llm = Llama(model_path=str(gguf), n_ctx=2048, n_threads=threads, verbose=False)
    text = engine.tokenizer.decode(prompts(engine, 1)[0])
    eos = engine.tokenizer.eos_token_id
    llm.create_completion(text, max_tokens=8, temperature=0.0)  # warm-up
    best = 0.0
    for _ in range(rounds):
        start = time.perf_counter()
        out = llm.create_completion(text, max_tokens=tokens, temperature=0.0, logit_bias={eos: -1e9})
        best = max(best, out["usage"]["completion_tokens"] / (time.perf_counter() - start))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--rounds", type=int, default=2, help="repeats per setting; the best is reported")
    parser.add_argument("--threads", type=int, default=None, help="fix the engine's threads (default: tuned)")
    args = parser.parse_args()
    import torch

    threads = torch.get_num_threads()
    load = os.getloadavg()[0]
    print(f"cpus={os.cpu_count()} torch_threads={threads} dtype={args.dtype} tokens/request={args.tokens} load_avg_1m={load:.1f}")
    if load > 1.5:
        print("note: the machine is busy; rates are lower than on an idle machine")
    levels = [int(c) for c in args.concurrency.split(",")]
    engine = Engine.from_name(DEFAULT_MODEL, dtype=args.dtype, max_batch=max(levels))
    if args.threads:
        engine.close()
        engine = Engine(engine.model, engine.tokenizer, dtype=args.dtype, max_batch=max(levels), threads=args.threads)
    ours(engine, 2, 8, 1)  # warm-up: kernels, cache allocation
    results = {}
    for level in levels:
        results[level], per_cpu_second = ours(engine, level, args.tokens, args.rounds)
        tuner = getattr(engine, "_tuner", None)
        chosen = f"decode threads {tuner.best}" if tuner is not None else ""
        print(
            f"ours       concurrency {level:>3}: {results[level]:8.1f} tok/s   "
            f"({per_cpu_second:6.1f} tok per CPU-second; {chosen})",
            flush=True,
        )
    reference = llama_cpp(engine, args.tokens, args.rounds, threads)
    if reference is None:
        print("llama.cpp  not importable (pip install llama-cpp-python to compare)")
    else:
        print(f"llama.cpp  single stream  : {reference:8.1f} tok/s")
        top = max(levels)
        print(f"ratio ours@{top} / llama.cpp@1 = {results[top] / reference:.2f} (goal >= 3)")
        print(f"ratio ours@1 / llama.cpp@1 = {results[min(levels)] / reference:.2f}")
    engine.close()


if __name__ == "__main__":
    main()
