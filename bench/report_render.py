"""CPU time to render an eval report with many rollouts (`prime eval view RUN --html`), by run size.

    python bench/report_render.py [--sizes 1000,10000]

Builds a run dir of N rollouts from a small real run (the scripted-model eval of tests/support/report_runs.py),
renders it, and prints CPU seconds and microseconds per rollout for each size, and the ratio of the largest
size's per-rollout cost to the smallest's (near 1.0: rendering is linear in the rollouts). Run by hand.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support import report_runs  # noqa: E402

from evalkit.report.html import write_report  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated rollout counts")
    sizes = [int(s) for s in parser.parse_args().sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "outputs"
        source = report_runs.make_eval_runs(out)[0]
        per_rollout = []
        for n in sizes:
            run = report_runs.write_big_run(source, Path(tmp) / f"big{n}", n)
            started = time.process_time()
            write_report([run])
            cpu_s = time.process_time() - started
            per_rollout.append(cpu_s / n)
            print(f"{n:>7} rollouts: {cpu_s:6.2f} s CPU  ({cpu_s / n * 1e6:7.1f} us per rollout)")
        print(f"per-rollout cost, largest / smallest size: {per_rollout[-1] / per_rollout[0]:.2f}")


if __name__ == "__main__":
    main()
