"""`prime rl run` beside TRL's GRPOTrainer on the same work: step time, memory, learning.

Both train the embedded SmolLM2-135M (no hub download: the converted local copy) with LoRA on the
built-in ``arithmetic`` environment (``easy``), with the same training rows in the same order, the
same prompts (its system prompt + question, the model's chat template), the same reward (the
environment's ``correct_answer``), LoRA (rank, alpha, target modules), learning rate, batch
(``--prompts`` x ``--generations``), sampling temperature 1.0 and ``--tokens`` completion tokens.
Each arm runs in its own process, interleaved (prime, trl, prime, trl, ...), so a shared machine's
load lands on both alike; ``--busy`` runs a CPU-bound busy loop (``timeout``-bounded) beside each arm.

For each arm it prints the mean seconds per step, split into generation and training, the peak RSS
of its process, and the held-out reward (greedy, the same ``--eval-examples`` rows, scored the same
way by one evaluation function on the in-process engine) before and after training; then the
ratios prime / trl. Run by hand (needs the optional ``bench`` extra: ``pip install trl``):

    python bench/rl_vs_trl.py                        # 10 steps, 2 prompts x 8 generations, 32 tokens
    python bench/rl_vs_trl.py --busy --repeats 1     # with a busy loop beside each arm
    python bench/rl_vs_trl.py --arms prime,prime-onpolicy --busy   # overlap vs on-policy under load

What differs by design: TRL's default loss (``dapo``, clipped ratio) against primekit's masked
importance ratio; TRL generates with ``transformers.generate`` on the training module and then trains
(on-policy), primekit samples on its engine (overlapped with training at ``async_level = 1``; the
``prime-onpolicy`` arm runs ``async_level = 0``). Neither uses a KL term or reward scaling.
Primekit's "generation" is the sampler's time, which overlaps the previous step's training, so its
generation + training can exceed its step time. Measurements: bench/README.md, docs/engine-speed.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if not os.environ.get("PRIMEKIT_BENCH_TREE"):
    sys.path.insert(0, str(ROOT))

MODEL = "local/smollm2-135m"
SEED = 0


def _arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--prompts", type=int, default=2, help="prompts per step")
    parser.add_argument("--generations", type=int, default=8, help="completions per prompt (the group)")
    parser.add_argument("--tokens", type=int, default=32, help="completion tokens")
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--eval-examples", type=int, default=32)
    parser.add_argument(
        "--arms",
        default="prime,trl",
        help="comma-separated, run in this order per repeat: prime, trl, "
        "prime-onpolicy; prime@DIR / prime-onpolicy@DIR runs primekit from the checkout DIR (before/after)",
    )
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--busy", action="store_true", help="a CPU-bound busy loop beside each arm")
    parser.add_argument(
        "--arm-timeout",
        type=float,
        default=None,
        help="seconds an arm may take; then it is stopped and "
        "its finished steps reported (a starved trainer may otherwise take hours)",
    )
    parser.add_argument("--output-dir", default=None, help="where runs go (default: a temp folder)")
    parser.add_argument("--arm", default=None, help=argparse.SUPPRESS)  # internal: run one arm in this process
    parser.add_argument("--result", default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


# ----- what both arms share ---------------------------------------------------------------------


def task_rows(args: argparse.Namespace) -> tuple[list[dict], list[dict], str]:
    """(training rows in primekit's order for the steps run, held-out rows, system prompt)."""
    from evalkit.builtin.arithmetic import SYSTEM_PROMPT, load_environment
    from rl_backend.mixture import DataOrder

    env = load_environment(difficulty="easy")
    train = list(env.dataset)
    order = DataOrder(len(train), SEED)
    rows = [train[order.index(c)] for c in range(args.steps * args.prompts)]
    return rows, list(env.eval_dataset)[: args.eval_examples], SYSTEM_PROMPT


def messages(row: dict, system_prompt: str) -> list[dict]:
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": row["question"]}]


def reward(text: str, answer: str) -> float:
    """The environment's ``correct_answer`` on one reply."""
    from evalkit.builtin.arithmetic import extract_integer

    got = extract_integer(text)
    return float(got is not None and int(got) == int(answer))


def held_out(model: Any, tokenizer: Any, rows: list[dict], system_prompt: str, tokens: int) -> float:
    """Mean reward of greedy replies on ``rows``, on the engine in fp32 (the same for every arm); NaN without rows."""
    if not rows:
        return math.nan
    from evalkit.core.types import SamplingArgs
    from evalkit.model.engine import Engine

    engine = Engine(model, tokenizer, dtype="fp32", max_batch=len(rows), device="cpu")
    try:
        prompts = [engine.encode_chat(messages(row, system_prompt)) for row in rows]
        results = engine.generate_many(prompts, SamplingArgs(temperature=0.0, max_tokens=tokens))
    finally:
        engine.close()
    return statistics.fmean(reward(r.text, row["answer"]) for r, row in zip(results, rows))


def base_model() -> tuple[Any, Any]:
    from evalkit.model.loading import load_model
    from evalkit.model.registry import resolve_model

    return load_model(resolve_model(MODEL), "float32")


# ----- the arms (each in its own process) --------------------------------------------------------


def run_prime(args: argparse.Namespace, out: Path, on_policy: bool) -> dict[str, Any]:
    from transformers import AutoModelForCausalLM

    from rl_backend.config import RLConfig
    from rl_backend.runner import run

    _rows, evals, system_prompt = task_rows(args)
    model, tokenizer = base_model()
    before = held_out(model, tokenizer, evals, system_prompt, args.tokens)
    del model
    config = RLConfig.model_validate({
        "model": MODEL, "run_name": f"prime-{time.strftime('%H%M%S')}-{os.getpid()}", "seed": SEED,
        "max_steps": args.steps, "batch_size": args.prompts * args.generations,
        "rollouts_per_example": args.generations,
        "sampling": {"max_tokens": args.tokens, "temperature": 1.0},
        "env": [{"id": "arithmetic", "args": {"difficulty": "easy"}}],
        "trainer": {"lr": args.lr, "lora": {"rank": args.rank, "alpha": 2 * args.rank}, "on_policy": on_policy,
                    "micro_batch_size": args.prompts * args.generations, "device": "cpu"},
        "ckpt": {"interval": 0, "keep_last": 1}, "eval": {"interval": 0}, "baseline": {"enabled": False},
    })  # fmt: skip
    summary = run(config, output_dir=out)
    assert summary is not None
    steps = [json.loads(line) for line in (summary.run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in steps if "loss" in m]
    trained = AutoModelForCausalLM.from_pretrained(summary.run_dir / "weights" / f"step_{args.steps}").eval()
    after = held_out(trained, tokenizer, evals, system_prompt, args.tokens)
    return {"step_s": [m["step_s"] for m in steps], "gen_s": [m["gen_s"] for m in steps],
            "train_s": [m["train_s"] for m in steps], "before": before, "after": after,
            "reward": [m["reward_mean"] for m in steps]}  # fmt: skip


def run_trl(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    from datasets import Dataset
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    from rl_backend.config import LoraConfig as PrimeLora

    rows, evals, system_prompt = task_rows(args)
    model, tokenizer = base_model()
    before = held_out(model, tokenizer, evals, system_prompt, args.tokens)
    data = Dataset.from_list([{"prompt": messages(row, system_prompt), "answer": row["answer"]} for row in rows])

    def correct_answer(completions: list, answer: list, **_: Any) -> list[float]:
        return [reward(c[-1]["content"], a) for c, a in zip(completions, answer)]

    config = GRPOConfig(
        output_dir=str(out / "trl"), max_steps=args.steps, per_device_train_batch_size=args.prompts * args.generations,
        num_generations=args.generations, max_completion_length=args.tokens, learning_rate=args.lr, temperature=1.0,
        beta=0.0, scale_rewards="none", shuffle_dataset=False, seed=SEED, use_cpu=True, bf16=False,
        gradient_accumulation_steps=1, gradient_checkpointing=False, lr_scheduler_type="constant", warmup_steps=0,
        weight_decay=0.0, max_grad_norm=1.0,
        report_to="none", save_strategy="no", logging_steps=1, disable_tqdm=True,
    )  # fmt: skip
    lora = LoraConfig(r=args.rank, lora_alpha=2 * args.rank, lora_dropout=0.0,
                      target_modules=PrimeLora().target_modules, task_type="CAUSAL_LM")  # fmt: skip
    trainer = _timed_trainer(GRPOTrainer)(model=model, reward_funcs=[correct_answer], args=config, train_dataset=data,
                                          processing_class=tokenizer, peft_config=lora)  # fmt: skip
    trainer.step_log = out / "trl" / f"steps-{os.getpid()}.jsonl"  # what --arm-timeout reads back
    trainer.train()
    trained = trainer.model.eval()
    after = held_out(trained, tokenizer, evals, system_prompt, args.tokens)
    gen, total = trainer.gen_times, trainer.step_times
    return {"step_s": total, "gen_s": gen, "train_s": [t - g for t, g in zip(total, gen)], "before": before,
            "after": after,
            "reward": [row["reward"] for row in trainer.state.log_history if "reward" in row]}  # fmt: skip


def _timed_trainer(base: type) -> type:
    """``base`` (GRPOTrainer) recording each optimizer step's seconds and the generation inside it,
    also one JSON line per finished step to ``step_log`` (when set), as primekit's metrics.jsonl."""

    class Timed(base):  # type: ignore[misc,valid-type]
        gen_times: list[float]
        step_times: list[float]
        step_log: Path | None = None

        def _generate_and_score_completions(self, *a: Any, **k: Any) -> Any:
            started = time.perf_counter()
            try:
                return super()._generate_and_score_completions(*a, **k)
            finally:
                self.gen_times = [*getattr(self, "gen_times", []), time.perf_counter() - started]

        def training_step(self, *a: Any, **k: Any) -> Any:
            started = time.perf_counter()
            try:
                return super().training_step(*a, **k)
            finally:
                self.step_times = [*getattr(self, "step_times", []), time.perf_counter() - started]
                if self.step_log is not None:
                    gen = getattr(self, "gen_times", [0.0])[-1]
                    step = {
                        "step_s": self.step_times[-1],
                        "gen_s": gen,
                        "train_s": self.step_times[-1] - gen,
                        "loss": None,
                    }
                    self.step_log.parent.mkdir(parents=True, exist_ok=True)
                    with self.step_log.open("a") as log:
                        log.write(json.dumps(step) + "\n")

    return Timed


def run_arm(args: argparse.Namespace) -> None:
    """Child process: one arm, its result as JSON to ``--result`` (peak RSS included)."""
    out = Path(args.output_dir)
    started = time.perf_counter()
    result = run_trl(args, out) if args.arm == "trl" else run_prime(args, out, on_policy=args.arm == "prime-onpolicy")
    result["wall_s"] = time.perf_counter() - started
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    Path(args.result).write_text(json.dumps(result))


# ----- the driver --------------------------------------------------------------------------------


def spawn(arm: str, args: argparse.Namespace, out: Path, argv: list[str]) -> dict[str, Any]:
    """Run ``arm`` in a child process (with a busy loop beside it under ``--busy``); its result."""
    name, _, tree = arm.partition("@")
    result = out / f"{name}-{time.time_ns()}.json"
    busy = None
    if args.busy:  # bounded by timeout even if this driver dies; ended by its own PID when the arm is done
        busy = subprocess.Popen(["timeout", "1800", sys.executable, "-c", "while True: pass"])
    try:
        tree = tree or str(ROOT)
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [tree, os.environ.get("PYTHONPATH")])),
        }
        if tree != str(ROOT):
            env["PRIMEKIT_BENCH_TREE"] = tree  # import primekit from there, not from beside this script
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            *argv,
            "--arm",
            name,
            "--result",
            str(result),
            "--output-dir",
            str(out),
        ]
        child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
        try:
            if child.wait(timeout=args.arm_timeout):
                raise SystemExit(f"arm {arm} failed (exit {child.returncode})")
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            return _partial(out, child.pid, args.arm_timeout)
    finally:
        if busy is not None:
            busy.terminate()
            busy.wait()
    return json.loads(result.read_text())


def _partial(out: Path, pid: int, seconds: float) -> dict[str, Any]:
    """What an arm stopped by ``--arm-timeout`` finished: its steps' times from metrics.jsonl (prime)
    or the step log of :func:`_timed_trainer` (TRL)."""
    logs = [*out.glob(f"rl/prime-*-{pid}/metrics.jsonl"), *out.glob(f"trl/steps-{pid}.jsonl")]
    steps = [json.loads(line) for path in logs for line in path.read_text().splitlines()]
    finished = [m for m in steps if "loss" in m]
    steps = finished or [{"step_s": math.nan, "gen_s": math.nan, "train_s": math.nan}]
    return {
        "step_s": [m["step_s"] for m in steps],
        "gen_s": [m["gen_s"] for m in steps],
        "train_s": [m["train_s"] for m in steps],
        "before": math.nan,
        "after": math.nan,
        "wall_s": seconds,
        "peak_rss_mb": math.nan,
        "timed_out": len(finished),
    }


def summarize(arm: str, r: dict[str, Any]) -> str:
    mean = statistics.fmean
    if "timed_out" in r:
        return (
            f"{arm:<15} stopped after {r['wall_s']:.0f} s; mean of its finished steps: step {mean(r['step_s']):6.2f} s "
            f"(gen {mean(r['gen_s']):6.2f} s, train {mean(r['train_s']):6.2f} s)"
        )
    return (f"{arm:<15} step {mean(r['step_s']):6.2f} s "
            f"(gen {mean(r['gen_s']):6.2f} s, train {mean(r['train_s']):6.2f} s)  "
            f"wall {r['wall_s']:6.1f} s  peak RSS {r['peak_rss_mb']:6.0f} MB  "
            f"held-out {r['before']:.3f} -> {r['after']:.3f} "
            f"({r['after'] - r['before']:+.3f})")  # fmt: skip


def main() -> None:
    args = _arguments()
    if args.arm:
        run_arm(args)
        return
    argv = [a for a in sys.argv[1:] if a != "--busy"]
    out = Path(args.output_dir or tempfile.mkdtemp(prefix="rl-vs-trl-"))
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    print(
        f"cpus={os.cpu_count()} steps={args.steps} batch={args.prompts}x{args.generations} tokens={args.tokens} "
        f"lr={args.lr:g} lora r={args.rank} held-out={args.eval_examples} "
        f"busy loop={'yes' if args.busy else 'no'} load_avg_1m={os.getloadavg()[0]:.1f}"
    )
    results: dict[str, list[dict[str, Any]]] = {arm: [] for arm in arms}
    for repeat in range(args.repeats):
        for arm in arms:
            results[arm].append(spawn(arm, args, out, argv))
            print(f"[{repeat + 1}] " + summarize(arm, results[arm][-1]), flush=True)
    if "trl" in results and len(arms) > 1:
        for arm in (a for a in arms if a != "trl"):
            for key in ("step_s", "gen_s", "train_s"):
                ratios = [
                    statistics.fmean(p[key]) / statistics.fmean(t[key]) for p, t in zip(results[arm], results["trl"])
                ]
                print(f"{arm} / trl {key}: " + ", ".join(f"{x:.2f}" for x in ratios))
            rss = [p["peak_rss_mb"] / t["peak_rss_mb"] for p, t in zip(results[arm], results["trl"])]
            print(f"{arm} / trl peak RSS: " + ", ".join(f"{x:.2f}" for x in rss))
    print(f"runs: {out}")


if __name__ == "__main__":
    main()
