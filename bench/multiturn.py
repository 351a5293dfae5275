"""Multi-turn rollouts on the embedded engine: prefix reuse on vs off, and RL generation vs eval.

Run by hand: ``python bench/multiturn.py [-n 2] [-r 4] [-c 8] [--max-tokens 24] [--steps 2] [--skip-rl]``.
The workload is ``bench/mastermind`` (a long rules prompt, then one guess and one feedback message per
turn, seven turns), rolled out like ``prime eval run ./bench/mastermind -n 2 -r 4 -c 8``:

1. eval with the engine's prefix cache off (``prefix_cache_gb=0``: every turn prefills the whole
   conversation), then on (each turn prefills what is new since the conversation's previous turn);
   for each: prompt tokens prefilled per rollout against the final conversation's length, generated
   tokens/s and wall time;
2. ``prime rl run`` on the same environment and sizes (``--skip-baseline``), with the difficulty
   filter off so each step rolls out the same ``n x r`` rollouts as the eval (with it on, groups whose
   rollouts all score alike are replaced by new ones, up to ``filter.max_rounds`` rounds per step);
   its generation seconds per step against the eval's wall time (reuse on).

Everything runs in this one process, so the ratios share the machine's load (printed, from
``os.getloadavg``). Goals: prefilled <= 1.3x the final conversation, eval >= 3x faster with reuse, RL
step generation <= 1.2x the eval.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ENV = Path(__file__).resolve().parent / "mastermind"
MODEL = "local/smollm2-135m"


def load(prompt: str) -> str:
    one, five, fifteen = os.getloadavg()
    return f"{prompt} load average {one:.2f} {five:.2f} {fifteen:.2f}"


def eval_once(engine, args: argparse.Namespace) -> dict[str, float]:  # noqa: ANN001 - an Engine
    """One eval of ``-n x -r`` rollouts through the engine's LocalClient; what it cost."""
    from evalkit.clients.factory import make_client
    from evalkit.clients.spec import ClientSpec
    from evalkit.core.types import SamplingArgs
    from evalkit.eval.rollouts import run_groups
    from evalkit.loading.resolve import load_environment

    env = load_environment(str(ENV))
    client = make_client(ClientSpec(model=MODEL, engine=engine))
    before = engine.prefix_stats()
    started = time.perf_counter()
    groups = asyncio.run(run_groups(env, client, env.get_eval_dataset(args.n), rollouts_per_example=args.r,
                                    sampling=SamplingArgs(max_tokens=args.max_tokens),
                                    max_concurrent=args.c))  # fmt: skip
    wall = time.perf_counter() - started
    after = engine.prefix_stats()
    states = [state for group in groups for state in group]
    finals = [
        len(s.responses[-1].prompt_token_ids) + len(s.responses[-1].completion_token_ids) for s in states if s.responses
    ]
    generated = sum(len(r.completion_token_ids) for s in states for r in s.responses)
    return {
        "rollouts": len(states),
        "turns": statistics.fmean(s.turns for s in states),
        "prompt": (after["prompt_tokens"] - before["prompt_tokens"]) / len(states),
        "prefilled": (after["prefilled_tokens"] - before["prefilled_tokens"]) / len(states),
        "final": statistics.fmean(finals),
        "generated": generated,
        "wall": wall,
        "cache_mb": after["cache_bytes"] / 2**20,
    }


def rl_once(args: argparse.Namespace, out: Path) -> list[dict[str, float]]:
    """``prime rl run`` (in process) on the same environment and sizes; its metrics.jsonl rows."""
    from rich.console import Console

    from rl_backend.config import load_rl_config
    from rl_backend.runner import run

    config = out / "rl.toml"
    config.write_text(
        f'model = "{MODEL}"\nmax_steps = {args.steps}\nbatch_size = {args.n * args.r}\n'
        f"rollouts_per_example = {args.r}\n"
        f"max_concurrent = {args.c}\n\n[sampling]\nmax_tokens = {args.max_tokens}\n\n[filter]\nenabled = false\n\n"
        f'[[env]]\nid = "{ENV}"\n'
    )
    summary = run(load_rl_config(config), output_dir=out, skip_baseline=True, console=Console(stderr=True, quiet=True))
    return [json.loads(line) for line in (summary.run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def report(name: str, row: dict[str, float]) -> None:
    print(
        f"{name:<10} {row['rollouts']:>3} rollouts x {row['turns']:.1f} turns | prompt tokens per rollout: sent "
        f"{row['prompt']:7.0f}, prefilled {row['prefilled']:7.0f} = {row['prefilled'] / row['final']:.2f}x the final "
        f"conversation ({row['final']:.0f}) | {row['generated'] / row['wall']:6.1f} generated tok/s, "
        f"{(row['prefilled'] * row['rollouts'] + row['generated']) / row['wall']:6.0f} computed tok/s | "
        f"wall {row['wall']:6.1f} s"
        f" | prefix cache {row['cache_mb']:.0f} MiB"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=2, help="examples")
    parser.add_argument("-r", type=int, default=4, help="rollouts per example")
    parser.add_argument("-c", type=int, default=8, help="concurrent rollouts")
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--steps", type=int, default=2, help="RL steps")
    parser.add_argument("--skip-rl", action="store_true")
    args = parser.parse_args()
    if min(args.n, args.r, args.c, args.max_tokens, args.steps) < 1:
        print("error: -n, -r, -c, --max-tokens and --steps must be at least 1", file=sys.stderr)
        return 2
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from evalkit.model.engine import Engine
    from evalkit.model.loading import load_model
    from evalkit.model.registry import resolve_model

    model, tokenizer = load_model(resolve_model(MODEL), "bfloat16")
    rows = {}
    for name, gb in (("reuse off", 0.0), ("reuse on", None)):
        engine = Engine(model, tokenizer, dtype="bfloat16", max_batch=32, name=MODEL, prefix_cache_gb=gb)
        eval_once(engine, argparse.Namespace(**{**vars(args), "n": 1, "r": 1}))  # warm-up: oneDNN kernels, env import
        engine.update_weights()  # a cold prefix cache: the warm-up's rules prompt is not reused
        print(load(f"[{name}]"), flush=True)
        rows[name] = eval_once(engine, args)
        engine.close()
        report(name, rows[name])
    speedup = rows["reuse off"]["wall"] / rows["reuse on"]["wall"]
    print(f"eval wall time, reuse off / on: {speedup:.2f}x (goal >= 3x); prefilled / final conversation with reuse: "
          f"{rows['reuse on']['prefilled'] / rows['reuse on']['final']:.2f}x (goal <= 1.3x)")  # fmt: skip
    if args.skip_rl:
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-multiturn-") as tmp:
        print(load("[rl]"), flush=True)
        metrics = rl_once(args, Path(tmp))
    eval_wall = rows["reuse on"]["wall"]
    for m in metrics:
        print(f"rl step {m['step']}: {m['groups_generated'] * args.r} rollouts, {m['gen_tokens']} generated tokens, "
              f"generation "
              f"{m['gen_s']:.1f} s = {m['gen_s'] / eval_wall:.2f}x the eval's {eval_wall:.1f} s (goal <= 1.2x); "
              f"training {m['train_s']:.1f} s, step {m['step_s']:.1f} s")  # fmt: skip
    print(load("[end]"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
