"""Does each loss learn? bench/rl_learns.py's run (LoRA RL on easy arithmetic), once per loss, same steps and seed.

Prints one row per loss: held-out reward before (step 0, the same for every loss: same weights, same
examples, greedy) and after, the training reward of the first and last step, and the wall time. Run by hand:

    python bench/rl_losses.py --device cpu --steps 6 --batch-size 16 --eval-examples 32
    python bench/rl_losses.py --device cuda          # rl_learns' defaults (20 steps x 32 rollouts)
    python bench/rl_losses.py --losses dapo,cispo    # a subset

Results go to docs/rl-losses.md.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from rl_learns import arguments, learns_config

from rl_backend.losses import LOSSES
from rl_backend.runner import run


def main() -> None:
    parser = arguments()
    parser.add_argument("--losses", default=",".join(LOSSES), help="comma-separated trainer.loss.type values")
    args = parser.parse_args()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    rows = []
    for name in args.losses.split(","):
        started = time.perf_counter()
        summary = run(
            learns_config(args, f"rl-losses-{stamp}-{name}", {"type": name}), output_dir=Path(args.output_dir)
        )
        assert summary is not None
        train = [json.loads(line) for line in (summary.run_dir / "metrics.jsonl").read_text().splitlines()]
        rewards = [row["reward_mean"] for row in train if "loss" in row]
        rows.append((name, summary.eval_rewards.get(0), summary.eval_rewards.get(args.steps), rewards[0], rewards[-1],
                     (time.perf_counter() - started) / 60))
        print(_table(rows, args), flush=True)


def _table(rows: list[tuple], args) -> str:
    head = (f"| loss | held-out before | held-out after | train reward step 1 | step {args.steps} | wall min |\n"
            "|---|---|---|---|---|---|")
    lines = [f"| `{n}` | {b:.3f} | {a:.3f} | {r0:.2f} | {r1:.2f} | {m:.1f} |" for n, b, a, r0, r1, m in rows]
    return "\n".join([head, *lines])


if __name__ == "__main__":
    main()
