"""Distillation toward an RL-trained teacher: `opd`, `sft` (teacher-sampled) and `grpo` from the same start.

The teacher is the embedded SmolLM2-135M after bench/rl_learns.py's LoRA RL run on easy arithmetic (its merged
``weights/step_N``, cached under ``--output-dir``/teacher-... so a rerun skips it; ``--teacher DIR`` names one
already trained). Its held-out reward is measured with ``prime eval run`` on the same held-out examples, greedy,
as the arms' periodic evals see them. The student is the base model; each arm is a `prime rl run` (in-process,
LoRA, rl_learns' settings with a smaller budget: 32 tokens, lr 5e-4, strictly on-policy) with the same steps,
rollouts per step, seed and learning rate, evaluated greedy every ``--eval-every`` steps and at step 0:

* ``opd``: the student samples, the teacher's reverse KL per token is the signal (``[algo.teacher]``);
* ``sft``: the teacher samples, the student trains with cross-entropy on its tokens (``[algo.sampling.source]``),
  when this primekit trains ``sft`` (else the arm prints that it is not available and the others run);
* ``grpo``: plain RL on the environment's reward, from the same start.

The teacher is served by ``prime serve`` on 127.0.0.1 (``--teacher-via serve``, the default: the path a prime-rl
user takes with vLLM) or loaded in-process from its folder (``--teacher-via local``). Prints, per arm,
the held-out reward at each eval, the first step at which it reaches 90% of the teacher's held-out reward, and the
share of the base-to-teacher gap closed at the end, ``(final - base) / (teacher - base)``. Run by hand:

    python bench/distill.py --device cpu                      # defaults below; ~30-40 min on a loaded 2-core CPU
    python bench/distill.py --device cpu --arms opd,grpo --steps 6
    python bench/distill.py --device cuda --steps 20 --eval-examples 64 --teacher-steps 20

Measurements: bench/README.md ("Distillation toward an RL-trained teacher").
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from rl_learns import arguments, learns_config
from sft_gain import ENV_ARGS, eval_run

ARMS = ("opd", "sft", "grpo")
TEACHER_VIA = ("serve", "local")
SERVE_START_S = 600.0


def distill_arguments() -> argparse.ArgumentParser:
    """rl_learns' flags (the arms' LoRA RL settings), with a smaller default budget, plus the arms and the teacher."""
    parser = arguments()
    parser.description = __doc__
    parser.set_defaults(steps=6, batch_size=16, max_tokens=32, lr=5e-4, eval_examples=32, on_policy=True,
                        output_dir="outputs/bench-distill")
    parser.add_argument("--overlap", dest="on_policy", action="store_false",
                        help="overlap generation with training (rl_learns' default; on-policy here)")
    parser.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, from {', '.join(ARMS)}")
    parser.add_argument("--eval-every", type=int, default=2, help="held-out eval every this many steps (and step 0)")
    parser.add_argument("--teacher-steps", type=int, default=8, help="steps of the teacher's RL run")
    parser.add_argument("--teacher-batch-size", type=int, default=16, help="rollouts per step of the teacher's run")
    parser.add_argument("--teacher", default=None, help="an RL run's weights/step_N folder to use as the teacher")
    parser.add_argument("--teacher-via", default="serve", help="serve (prime serve on 127.0.0.1) or local")
    return parser


def parse_arms(text: str) -> list[str]:
    """The arms named in ``--arms``, in the order given; an unknown or repeated one is a :class:`ValueError`."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in ARMS]
    if unknown:
        raise ValueError(f"unknown arm '{unknown[0]}' in --arms; choose from {', '.join(ARMS)}")
    if not names or len(set(names)) != len(names):
        raise ValueError(f"--arms names each arm at most once and at least one ({', '.join(ARMS)}); got '{text}'")
    return names


def parse(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    """(the flags, the arms): a bad ``--arms`` or ``--teacher-via`` is one ``error:`` line and exit code 2."""
    args = distill_arguments().parse_args(argv)
    try:
        arms = parse_arms(args.arms)
        if args.teacher_via not in TEACHER_VIA:
            raise ValueError(f"--teacher-via is serve or local, not '{args.teacher_via}'")
        if args.eval_every < 1 or args.steps < 1 or args.teacher_steps < 1:
            raise ValueError("--steps, --teacher-steps and --eval-every must be at least 1")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    return args, arms


def sft_missing() -> str | None:
    """Why this primekit cannot train the ``sft`` arm (``None``: it can)."""
    from rl_backend.algorithms import ALGORITHMS

    algo = ALGORITHMS.get("sft")
    if algo is None:
        return "no 'sft' algorithm"
    return algo.missing


def teacher_weights(args: argparse.Namespace) -> Path:
    """The teacher's merged weights: ``--teacher``, else rl_learns' run with the teacher's budget, cached under a
    folder named by its settings (a rerun with the same settings reuses it)."""
    from rl_backend.runner import run

    if args.teacher:
        folder = Path(args.teacher).resolve()
        if not (folder / "config.json").is_file():
            print(f"error: --teacher {args.teacher} is not a model folder (no config.json); give an RL run's "
                  "weights/step_N", file=sys.stderr)
            raise SystemExit(2)
        return folder
    teacher = argparse.Namespace(**{**vars(args), "steps": args.teacher_steps, "batch_size": args.teacher_batch_size})
    cache = (Path(args.output_dir) / f"teacher-s{teacher.steps}-b{teacher.batch_size}-g{args.group}-"
             f"t{args.max_tokens}-lr{args.lr:g}-r{args.rank}{'' if args.on_policy else '-overlap'}").resolve()
    found = sorted(cache.glob(f"rl/*/weights/step_{teacher.steps}"))
    if found:
        print(f"teacher: cached {found[-1]}", flush=True)
        return found[-1]
    print(f"teacher: training ({teacher.steps} steps x {teacher.batch_size} rollouts) into {cache}", flush=True)
    summary = run(learns_config(teacher, "teacher"), output_dir=cache, skip_baseline=True)
    assert summary is not None
    return summary.run_dir / "weights" / f"step_{teacher.steps}"


def held_out(args: argparse.Namespace, model: str, out: Path) -> float:
    """Greedy mean reward of ``model`` on the examples the arms' periodic evals use (the eval split shuffled with
    the run's seed 0, the first ``--eval-examples``), through ``prime eval run``."""
    _, reward = eval_run(out, model, "-n", str(args.eval_examples), "-r", "1", "-T", "0", "--shuffle", "--seed", "0",
                         "-t", str(args.max_tokens), "--device", args.device, env_args=ENV_ARGS)
    return reward


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def served(model: Path, device: str, log: Path) -> Iterator[str]:
    """``prime serve -m MODEL`` on a free port of 127.0.0.1 until ``/health`` answers; yields its base URL and
    stops that process (by its id) at the end."""
    port = _free_port()
    command = [sys.executable, "-m", "primekit_cli", "serve", "-m", str(model), "--port", str(port), "--dtype", "fp32",
               "--max-batch", "8", "--device", "cpu" if device == "auto" else device]
    with log.open("w") as sink:
        proc = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env={**os.environ})
    try:
        deadline = time.monotonic() + SERVE_START_S
        while True:
            if proc.poll() is not None:
                sys.exit(f"prime serve stopped ({proc.returncode}) before answering: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                sys.exit(f"prime serve did not answer /health in {SERVE_START_S:.0f} s; its log: {log}")
            time.sleep(1.0)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def arm_algo(arm: str, teacher: Path, url: str | None) -> dict | None:
    """The arm's ``[algo]`` table: the teacher as an endpoint (``url``) or, without one, as a local folder."""
    frozen = {"name": str(teacher), **({"base_url": url} if url else {})}
    if arm == "opd":
        return {"type": "opd", "teacher": frozen}
    if arm == "sft":
        return {"type": "sft", "sampling": {"source": frozen}}
    return None


def run_arm(args: argparse.Namespace, arm: str, teacher: Path, url: str | None, out: Path) -> dict[int, float]:
    """One arm's run from the base model; ``step -> held-out reward`` (step 0 included)."""
    from rl_backend.runner import run

    config = learns_config(args, arm, algo=arm_algo(arm, teacher, url), eval_interval=args.eval_every)
    summary = run(config, output_dir=out, skip_baseline=True)
    assert summary is not None
    return dict(sorted(summary.eval_rewards.items()))


def steps_to(curve: dict[int, float], target: float) -> int | None:
    """The first evaluated step whose held-out reward reaches ``target`` (``None``: none did)."""
    return next((step for step, reward in curve.items() if reward >= target), None)


def report(curves: dict[str, dict[int, float]], base: float, teacher: float, steps: int) -> str:
    """The table: each arm's held-out reward by step, steps to 90% of the teacher, and the gap closed."""
    target = 0.9 * teacher
    lines = [f"teacher held-out {teacher:.3f}; base {base:.3f}; 90% of the teacher: {target:.3f}"]
    for arm, curve in curves.items():
        reached = steps_to(curve, target)
        final = curve[max(curve)]
        gap = teacher - base
        closed = f"{(final - base) / gap:+.0%}" if abs(gap) > 1e-9 else "n/a (teacher = base)"
        where = f"reached at step {reached}" if reached is not None else f"not reached in {steps} steps"
        by_step = " ".join(f"{s}:{r:.3f}" for s, r in curve.items())
        lines.append(f"{arm:>5}: {by_step} | 90% of teacher {where} | gap closed {closed}")
    return "\n".join(lines)


def main() -> None:
    args, arms = parse()
    if "sft" in arms and (why := sft_missing()):
        print(f"sft: not available in this primekit ({why})", flush=True)
        arms.remove("sft")
    if not arms:
        return
    started = time.perf_counter()
    out = (Path(args.output_dir) / time.strftime("%Y%m%d-%H%M%S")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    teacher = teacher_weights(args)
    teacher_reward = held_out(args, str(teacher), out / "teacher-eval")
    print(f"teacher: {teacher}; held-out greedy reward on {args.eval_examples} examples {teacher_reward:.3f}",
          flush=True)
    curves: dict[str, dict[int, float]] = {}
    minutes: dict[str, float] = {}
    with contextlib.ExitStack() as stack:
        url = None
        if args.teacher_via == "serve" and any(arm != "grpo" for arm in arms):
            url = stack.enter_context(served(teacher, args.device, out / "serve.log"))
            print(f"teacher served at {url}", flush=True)
        for arm in arms:
            arm_started = time.perf_counter()
            curves[arm] = run_arm(args, arm, teacher, url, out)
            minutes[arm] = (time.perf_counter() - arm_started) / 60
            print(f"{arm}: held-out by step {curves[arm]} ({minutes[arm]:.1f} min)", flush=True)
    base = sum(curve[0] for curve in curves.values()) / max(1, len(curves)) if curves else float("nan")
    print(f"\n{args.steps} steps x {args.batch_size} rollouts per arm (group {args.group}, {args.max_tokens} tokens, "
          f"lr {args.lr:g}, LoRA r{args.rank}, seed 0), held-out greedy on {args.eval_examples} examples every "
          f"{args.eval_every} steps; teacher via {args.teacher_via}; "
          + ", ".join(f"{arm} {m:.1f} min" for arm, m in minutes.items()))
    print(report(curves, base, teacher_reward, args.steps))
    print(f"{(time.perf_counter() - started) / 60:.1f} min in all; load average {os.getloadavg()[0]:.1f}; {out}")


if __name__ == "__main__":
    main()
