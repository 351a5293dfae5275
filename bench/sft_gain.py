"""Does `prime sft run` on an eval's good rollouts raise held-out reward? The embedded model on easy arithmetic.

The three commands a user runs, each as a subprocess of the real CLI:

1. ``prime eval run arithmetic`` at temperature 1 on examples drawn with another seed (``--data-seed``): the
   SFT data's source;
2. ``prime data from-eval RUN -o rows.jsonl --min-reward 1``, then ``prime sft run`` (LoRA) on those rows;
3. ``prime eval run arithmetic`` greedy on the default held-out examples (seed 0), once with the embedded model
   and once with the SFT run's last ``weights/step_N``.

Easy arithmetic has only 100 distinct problems (two one-digit numbers), so the data and the held-out examples
may share problems; what SFT teaches here is mostly the reply's form (a short answer ending in the number).
Run by hand: ``python bench/sft_gain.py [--device cuda] [--examples 64] [--epochs 3]``.

Measured 2026-11-27 on the shared 2-core CPU (``--examples 32 --rollouts 8 --epochs 3 --lr 5e-4 --device cpu``): 55 rows
kept of 256 rollouts (data eval 0.215), 21 LoRA steps, loss 1.37 -> 0.89; held-out greedy 0.188 -> 0.906 (+0.72).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ENV_ARGS = {"difficulty": "easy"}


def prime(*args: str) -> str:
    """Run ``prime ARGS`` (this checkout's) and return its stdout; a failure stops the bench with its output."""
    command = [sys.executable, "-m", "primekit_cli", *args]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    if done.returncode:
        sys.exit(f"failed ({done.returncode}): {' '.join(command)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout + done.stderr


def eval_run(out: Path, model: str, *flags: str, env_args: dict | None = None) -> tuple[Path, float]:
    """(the eval's run dir, its mean reward), the newest run dir under ``out``."""
    prime("eval", "run", "arithmetic", "-m", model, "-a", json.dumps(env_args or ENV_ARGS), "-o", str(out), *flags)
    run_dir = max((p.parent for p in out.glob("evals/*/*/results.jsonl")), key=lambda p: p.stat().st_mtime)
    rewards = [
        json.loads(line)["reward"] for line in (run_dir / "results.jsonl").read_text().splitlines() if line.strip()
    ]
    return run_dir, sum(rewards) / len(rewards)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=32, help="examples in the data eval and in the held-out eval")
    parser.add_argument("--rollouts", type=int, default=8, help="rollouts per example of the data eval")
    parser.add_argument("--data-seed", type=int, default=1)
    parser.add_argument("--epochs", type=float, default=3)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--output-dir", default="outputs/bench-sft")
    args = parser.parse_args()
    out = Path(args.output_dir).resolve() / time.strftime("%Y%m%d-%H%M%S")
    started = time.perf_counter()
    common = ["-t", "32", "--device", args.device]
    data_run, data_reward = eval_run(out / "data", "local/smollm2-135m", "-n", str(args.examples), "-r",
                                     str(args.rollouts), "-T", "1.0", *common,
                                     env_args={**ENV_ARGS, "seed": args.data_seed})
    rows = out / "rows.jsonl"
    print(prime("data", "from-eval", str(data_run), "-o", str(rows), "--min-reward", "1").strip())
    config = out / "sft.toml"
    config.write_text(
        f'model = "local/smollm2-135m"\ndata = "rows.jsonl"\nrun_name = "sft"\nepochs = {args.epochs}\n'
        f'batch_size = 8\n\n[trainer]\nlr = {args.lr}\ndevice = "{args.device}"\n\n[ckpt]\ninterval = 0\n'
    )
    trained = prime("sft", "run", str(config), "-o", str(out))
    print("\n".join(line for line in trained.splitlines() if line.startswith(("sft ", "done", "  loss"))))
    weights = sorted((out / "sft" / "sft" / "weights").glob("step_*"), key=lambda p: int(p.name[5:]))[-1]
    held = ["-n", str(args.examples), "-r", "1", "-T", "0", *common]
    _, before = eval_run(out / "before", "local/smollm2-135m", *held)
    _, after = eval_run(out / "after", str(weights), *held)
    print(f"data eval (T=1, seed {args.data_seed}): mean reward {data_reward:.3f}; rows kept: "
          f"{sum(1 for _ in rows.open())}")
    print(f"held-out greedy reward on {args.examples} examples: {before:.3f} -> {after:.3f} ({after - before:+.3f}); "
          f"{(time.perf_counter() - started) / 60:.1f} min; {out}")


if __name__ == "__main__":
    main()
