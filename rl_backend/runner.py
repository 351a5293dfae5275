"""`prime rl run` end to end: resolve, plan, baseline checks, then the training loop.

The loop overlaps generation and training (one-step off-policy): while the trainer takes step n
(on rollouts sampled with the weights of step n-2), a worker thread already samples step n+1's
rollouts with the weights of step n-1. The sampler's weights change only between generations (``source.sync``), never
under an in-flight request. ``trainer.on_policy = true`` runs the two strictly one after the other.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from evalkit import runs
from evalkit.aio import LoopThread
from evalkit.errors import ConfigError, UserError
from evalkit.fileio import write_text_atomic
from evalkit.types import SamplingArgs
from rl_backend.config import RLConfig, to_toml
from rl_backend.plan import plan_lines, resolve_backend, trainer_device

__all__ = ["RunSummary", "Trainer", "plan_lines", "resolve_backend", "run", "run_dir_for"]


@dataclass
class RunSummary:
    run_dir: Path
    steps_done: int
    last_metrics: dict[str, Any]
    eval_rewards: dict[int, float]


Resume = bool | int | Path | None
"""What ``--resume`` asked for: ``True`` the newest checkpoint of the config's run, an ``int`` that
checkpoint step, a ``Path`` that run dir (its newest checkpoint), ``None``/``False`` a new run."""


def run_dir_for(config: RLConfig, output_dir: Path, resume: Resume = None) -> Path:
    """``<output>/rl/<run_name>``, else ``<output>/rl/<env>-<UTC timestamp>`` (see :mod:`evalkit.runs`).

    Without a ``run_name`` a resume continues the newest run of this environment that has
    checkpoints; a run dir passed to ``--resume`` is used as it is.
    """
    if isinstance(resume, Path):
        return resume
    root = Path(output_dir) / "rl"
    if config.run_name:
        return root / config.run_name
    slug = "+".join(spec.label for spec in config.env)
    if resume is None or resume is False:
        return root / f"{slug}-{runs.timestamp()}"
    found = runs.newest_run(root.glob(f"{slug}-*"), _is_rl_run) if root.is_dir() else None
    if found is None:
        raise UserError(f"--resume found no earlier run of '{slug}' under {root}; set run_name in the config or pass --resume RUN_DIR")
    return found


def _is_rl_run(path: Path) -> bool:
    """A folder a training run started in (it writes config.resolved.toml first), checkpoints or not."""
    return (path / "checkpoints").is_dir() or (path / "config.resolved.toml").is_file()


RESUME_FIXED = ("model", "env", "buffer")
"""What a resumed RL run must keep (its checkpoints are of that model, trained on those environments,
whose rows its cursor counts in that mixture)."""


def _check_same_run(run_dir: Path, config: RLConfig) -> None:
    from evalkit.tomlio import load_toml

    saved_file = run_dir / "config.resolved.toml"
    if saved_file.is_file():
        runs.require_same(run_dir, load_toml(saved_file), config.model_dump(mode="json", exclude_none=True), RESUME_FIXED,
                          defaults={"buffer": {}},
                          hint="resume with the same model, [[env]] tables and [buffer], or start a new run (another run_name)")


def resume_step(run_dir: Path, resume: Resume, config: RLConfig, notes: list[str] | None = None) -> int | None:
    """The checkpoint step to continue from (None: start at step 0); refuses what cannot be resumed.

    A run killed before its first checkpoint starts over from step 0 (baseline included). A run
    whose last checkpoint is at ``max_steps`` but whose final eval or weight export did not finish
    (killed while exporting) resumes at ``max_steps`` and redoes only those; a finished one is refused.
    ``notes`` collects what a person should be told.
    """
    from rl_backend.checkpoints import steps_in

    notes = notes if notes is not None else []
    max_steps = config.max_steps
    if resume is None or resume is False:
        if (run_dir / "metrics.jsonl").exists() or (run_dir / "checkpoints").exists():
            raise UserError(f"run dir {run_dir} already holds a training run; use --resume, or another run_name / --output-dir")
        return None
    _check_same_run(run_dir, config)
    available = steps_in(run_dir / "checkpoints")
    if not available:
        if isinstance(resume, int) and resume is not True:
            raise UserError(f"--resume {resume}: no checkpoints in {run_dir / 'checkpoints'}; pass --resume alone to start it over")
        notes.append(f"--resume: {run_dir} was stopped before its first checkpoint; starting it over from step 0")
        return None
    step = int(resume) if isinstance(resume, int) and resume is not True else available[-1]
    if step > max_steps or (step == max_steps and not final_work_left(run_dir, config)):
        raise UserError(f"--resume: checkpoint step {step} is already at max_steps ({max_steps}) and its final "
                        "eval and weights are done; raise max_steps to train further")
    if step == max_steps:
        notes.append(f"--resume: training reached max_steps ({max_steps}); finishing the final eval/weight export only")
    return step


def final_work_left(run_dir: Path, config: RLConfig) -> bool:
    """Whether the step-``max_steps`` eval or weight export of a run is missing (it was killed in them)."""
    step = config.max_steps
    weights_missing = config.ckpt.save_weights and not (run_dir / "weights" / f"step_{step}").is_dir()
    eval_missing = bool(config.eval.interval) and step not in recorded_evals(run_dir / "metrics.jsonl")
    return weights_missing or eval_missing


def recorded_evals(path: Path) -> dict[int, float]:
    """``step -> eval_reward`` from metrics.jsonl (a cut last line is ignored)."""
    found: dict[int, float] = {}
    if not path.is_file():
        return found
    for line in path.read_text().splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and "eval_reward" in data and "step" in data:
            found[int(data["step"])] = float(data["eval_reward"])
    return found


def _rows_jsonl(groups: list[list[Any]], batch: Any) -> str:
    kept = {id(g) for g in batch.kept}
    lines = []
    for group in groups:
        for state in group:
            row = {"env": batch.env_of.get(state.example_id), **state.to_row()}
            row["kept"] = id(group) in kept
            row["advantage"] = batch.advantages.get((state.example_id, state.rollout_idx))
            lines.append(json.dumps(row, default=str))
    return "\n".join(lines) + ("\n" if lines else "")


class Trainer:
    """Holds one run's pieces; ``run()`` goes from config to trained weights.

    Every coroutine of the run (training batches, the baseline, periodic evals) goes to one event
    loop that lives as long as the trainer (:class:`evalkit.aio.LoopThread`), so the source's client
    (an aiohttp session, the engine's batching queue) stays on one loop.
    """

    def __init__(self, config: RLConfig, run_dir: Path, console: Console | None = None):
        self.config = config
        self.run_dir = run_dir
        self.console = console or Console(stderr=True)
        self.eval_rewards: dict[int, float] = {}
        self._exported: set[int] = set()
        self._wandb: Any = None
        self.loop: LoopThread | None = None

    # ----- setup ---------------------------------------------------------------------------------
    def setup(self, backend: str) -> None:
        """Load the environments (here, on the calling thread: legacy verifiers environments install
        signal handlers, which only the main thread may), then the policy, the source and the collector."""
        import torch

        from rl_backend.collect import BatchCollector
        from rl_backend.mixture import EnvMixture, load_train_env
        from rl_backend.policy import Policy
        from rl_backend.sources import make_source

        members = [load_train_env(spec) for spec in self.config.env]
        for member in members:
            if backend == "vllm" and getattr(member.env, "tool_schemas", None) and not self.config.inference.tool_call_parser:
                raise ConfigError(
                    f"environment '{member.spec.id}' offers tools, and a vLLM server returns tool calls only with a parser; "
                    "set inference.tool_call_parser (e.g. 'hermes') to the one that fits the model"
                )
        self.mixture = EnvMixture(members, self.config.buffer.env_ratios, self.config.seed)
        torch.manual_seed(self.config.seed)
        self.policy = Policy(self.config, device=trainer_device(self.config))
        self.loop = LoopThread("rl-asyncio")  # no torch work here: the engine decodes on its own thread
        self.source = make_source(backend, self.config, self.policy, self.run_dir)
        self.collector = BatchCollector(self.config, self.mixture, self.source, self.loop)
        if self.config.wandb is not None:
            self._wandb = _start_wandb(self.config, self.run_dir)

    # ----- baseline and evals: eval run dirs inside the run -----------------------------------------
    def eval_dir(self, name: str, member: Any) -> str:
        """``name`` for a single environment, ``name/<env label>`` for each of several."""
        return name if len(self.mixture) == 1 else f"{name}/{member.name}"

    def run_eval(self, name: str, sampling: SamplingArgs, member: Any, **settings: Any) -> Any:
        """An eval of the current weights on one environment into ``<run>/<name>/`` (results.jsonl,
        metadata.json, the summary), through the eval runner with the source's client on the run's
        loop. What an earlier attempt left there (a run resumed from an older checkpoint) is replaced."""
        from evalkit.eval.config import EvalConfig
        from evalkit.eval.runner import arun_eval

        if self.loop is None:
            raise RuntimeError("Trainer.setup() must run first")
        spec = member.spec
        eval_dir = self.run_dir / name
        shutil.rmtree(eval_dir, ignore_errors=True)
        config = EvalConfig(
            env_id=spec.id, env_args=spec.args, model=self.config.model, max_concurrent=self.config.max_concurrent,
            system_prompt=self.config.system_prompt, sampling=sampling.to_dict(), shuffle=True,
            output_dir=str(self.run_dir), run_dir=str(eval_dir), preflight=False, **settings,
        )
        return self.loop.run(arun_eval(config, client=self.source.client, env=member.env))

    def baseline(self) -> dict[str, Any]:
        """The baseline checks on training examples of each environment (``<run>/baseline/[<env>/]``,
        ``baseline.json``); refuses when any environment fails them, naming it."""
        from rl_backend.baseline import run_checks

        cfg = self.config.baseline
        rpe = cfg.rollouts_per_example or self.config.rollouts_per_example

        def evaluate(member: Any) -> Any:
            return self.run_eval(self.eval_dir("baseline", member), self.collector.sampling, member, split="train",
                                 num_examples=cfg.num_examples, rollouts_per_example=rpe, seed=self.config.seed + 1)

        return run_checks([(m.name, lambda m=m: evaluate(m)) for m in self.mixture.members], cfg, rpe,
                          self.run_dir, self.console)

    # ----- evaluation / export at sync points ----------------------------------------------------
    def evaluate(self, step: int) -> dict[str, float]:
        """Held-out eval of step ``step``'s weights on each environment into ``<run>/evals/step_N/[<env>/]``.

        Returns the metrics line: ``eval_reward`` (the mean of the environments' mean rewards) and,
        with several environments, ``eval_reward/<env>`` for each.
        """
        cfg = self.config.eval
        sampling = self.collector.sampling
        if cfg.temperature is not None:
            sampling = sampling.merged({"temperature": cfg.temperature})
        self.source.reseed(self.config.seed * 31 + 17)
        means: dict[str, float] = {}
        self.eval_examples = 0
        for member in self.mixture.members:
            result = self.run_eval(self.eval_dir(f"evals/step_{step}", member), sampling, member, num_examples=cfg.num_examples,
                                   rollouts_per_example=cfg.rollouts_per_example, seed=self.config.seed)
            means[member.name] = float(result.summary["avg_reward"] or 0.0)
            self.eval_examples += int(result.metadata["num_examples"])
        mean = statistics.fmean(means.values())
        self.eval_rewards[step] = mean
        return {"eval_reward": mean, **({f"eval_reward/{k}": v for k, v in means.items()} if len(means) > 1 else {})}

    def at_sync_point(self, step: int, start_step: int, final: bool) -> None:
        """The sampler holds exactly step ``step``'s weights and is idle: evaluate/export if due.

        At the step a run resumed from, only what is missing is done: an eval not in
        ``eval_rewards`` when it is the final step, weights not on disk (a run killed in between).
        """
        from rl_backend.checkpoints import export_weights, prune

        cfg = self.config
        periodic = bool(cfg.eval.interval) and (step > start_step or final) and (step % cfg.eval.interval == 0 or final)
        if (periodic or (step == 0 and cfg.eval.at_start)) and step not in self.eval_rewards:
            line = self.evaluate(step)
            per_env = "".join(f", {k.split('/', 1)[1]} {v:.3f}" for k, v in line.items() if "/" in k)
            self.console.print(
                f"eval step {step}: mean reward {line['eval_reward']:.3f}{per_env} on {self.eval_examples} held-out examples"
            )
            self._append_metrics({"step": step, **line})
        due = cfg.ckpt.interval and step % cfg.ckpt.interval == 0
        exported = (self.run_dir / "weights" / f"step_{step}").is_dir()
        if (step > start_step or not exported) and cfg.ckpt.save_weights and (due or final) and step not in self._exported:
            model = getattr(self.source, "export_model", None)
            if model is not None:
                export_weights(self.run_dir, step, model(), self.policy.tokenizer)
                prune(self.run_dir / "weights", cfg.ckpt.keep_last)
                self._exported.add(step)

    # ----- the loop ------------------------------------------------------------------------------
    def train(self, start_step: int, cursor: int) -> dict[str, Any]:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        cfg = self.config
        off_policy = not cfg.trainer.on_policy
        last: dict[str, Any] = {}
        executor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="rl-rollouts", initializer=_worker_threads if off_policy else None
        )
        step = start_step
        self.source.sync(self.policy, step)
        self.at_sync_point(step, start_step, final=False)
        _split_threads(off_policy)
        pending: Future = executor.submit(self.collector.collect, step + 1, cursor, step)
        columns = (TextColumn("[bold]step {task.completed}/{task.total}"), BarColumn(), TextColumn("{task.description}"),
                   TimeElapsedColumn(), TimeRemainingColumn())
        try:
            with Progress(*columns, console=self.console, transient=False) as progress:
                task = progress.add_task("", total=cfg.max_steps, completed=step)
                while step < cfg.max_steps:
                    wait_started = time.perf_counter()
                    batch = pending.result()
                    wait_s = time.perf_counter() - wait_started
                    step_started = time.perf_counter()
                    if off_policy:
                        self.source.sync(self.policy, step)
                        self.at_sync_point(step, start_step, final=False)
                        if step + 1 < cfg.max_steps:
                            pending = executor.submit(self.collector.collect, step + 2, batch.cursor_after, step)
                    last = self.train_one(batch, step + 1, wait_s, step_started)
                    step += 1
                    if not off_policy:
                        self.source.sync(self.policy, step)
                        self.at_sync_point(step, start_step, final=step == cfg.max_steps)
                        if step < cfg.max_steps:
                            pending = executor.submit(self.collector.collect, step + 1, batch.cursor_after, step)
                    self.maybe_checkpoint(step, batch.cursor_after)
                    progress.update(task, completed=step, description=f"reward {last['reward_mean']:.3f} loss {last['loss']:+.4f}")
                    progress.console.print(
                        f"step {step:>4}  reward {last['reward_mean']:.3f}  kept {last['groups_kept']}/{last['groups_generated']}  "
                        f"loss {last['loss']:+.5f}  entropy {last['entropy']:.3f}  kl {last['mismatch_kl']:.2e}  "
                        f"gen {last['gen_s']:.1f}s  train {last['train_s']:.1f}s  wait {last['wait_s']:.1f}s"
                    )
        finally:
            executor.shutdown(wait=True, cancel_futures=True)
        self.source.sync(self.policy, step)
        self.at_sync_point(step, start_step, final=True)
        return last

    def train_one(self, batch: Any, step: int, wait_s: float, step_started: float) -> dict[str, Any]:
        from rl_backend.collect import to_samples

        samples = to_samples(batch)
        train_started = time.perf_counter()
        stats = self.policy.train_step(samples, step)
        train_s = time.perf_counter() - train_started
        rewards = [s.reward for g in batch.generated for s in g if s.scored]  # errors are not scores
        generated = len(batch.generated)
        metrics = {
            "step": step,
            "reward_mean": statistics.fmean(rewards) if rewards else 0.0,
            "reward_std": statistics.pstdev(rewards) if rewards else 0.0,
            "groups_generated": generated,
            "groups_kept": len(batch.kept),
            "filtered_frac": 1 - len(batch.kept) / generated if generated else 0.0,
            "rounds": batch.rounds,
            **(_reward_by_env(batch) if len(self.mixture) > 1 else {}),
            "errors": sum(1 for g in batch.generated for s in g if s.error),
            **{k: v for k, v in stats.items()},
            "gen_tokens": batch.gen_tokens,
            "tokens_per_s": batch.gen_tokens / batch.gen_seconds if batch.gen_seconds > 0 else 0.0,
            "policy_lag": step - 1 - batch.weights_step,
            "gen_s": batch.gen_seconds,
            "train_s": train_s,
            "wait_s": wait_s,
            "step_s": time.perf_counter() - step_started + wait_s,
        }
        if not math.isfinite(metrics["loss"]):
            raise UserError(f"step {step}: the loss is not finite ({metrics['loss']}); lower trainer.lr or use trainer.bf16 = false")
        self._append_metrics(metrics)
        (self.run_dir / "rollouts").mkdir(exist_ok=True)
        write_text_atomic(self.run_dir / "rollouts" / f"step_{step}.jsonl", _rows_jsonl(batch.generated, batch))
        if self._wandb is not None:
            self._wandb.log(metrics, step=step)
        return metrics

    def maybe_checkpoint(self, step: int, cursor: int) -> None:
        from rl_backend.checkpoints import prune, save_checkpoint

        cfg = self.config.ckpt
        if (cfg.interval and step % cfg.interval == 0) or step == self.config.max_steps:
            save_checkpoint(self.run_dir, step, self.policy, {"cursor": cursor, "eval_rewards": self.eval_rewards})
            prune(self.run_dir / "checkpoints", cfg.keep_last)

    def _append_metrics(self, metrics: dict[str, Any]) -> None:
        with (self.run_dir / "metrics.jsonl").open("a") as handle:
            handle.write(json.dumps({k: _round(v) for k, v in metrics.items()}) + "\n")
            handle.flush()

    def close(self) -> None:
        """Close the client on its loop, then the source, the loop and W&B (each even if another fails)."""
        source = getattr(self, "source", None)
        try:
            if source is not None and self.loop is not None:
                self.loop.run(source.client.aclose())
        finally:
            try:
                if source is not None:
                    source.close()
            finally:
                if self.loop is not None:
                    self.loop.close()
                if self._wandb is not None:
                    self._wandb.finish()


def _reward_by_env(batch: Any) -> dict[str, float]:
    """``reward_mean/<env>`` over the step's generated rollouts, for each environment that had some."""
    by_env: dict[str, list[float]] = {}
    for group in batch.generated:
        for state in group:
            by_env.setdefault(batch.env_of.get(state.example_id, "?"), []).append(state.reward)
    return {f"reward_mean/{name}": statistics.fmean(values) for name, values in by_env.items()}


def _split_threads(off_policy: bool) -> None:
    """With overlap on CPU, trainer and sampler threads each get half the cores.

    Two OpenMP pools of all cores each oversubscribe the machine, and spinning workers then slow
    both sides down several times over. torch's thread count is per calling thread under OpenMP, so
    the trainer (this thread) and the rollout worker (``_worker_threads``) each set their own.
    """
    import torch

    if not off_policy or torch.cuda.is_available():
        return
    cores = os.cpu_count() or 1
    torch.set_num_threads(max(1, cores // 2))


def _worker_threads() -> None:
    import torch

    if not torch.cuda.is_available():
        torch.set_num_threads(max(1, (os.cpu_count() or 1) - max(1, (os.cpu_count() or 1) // 2)))


def _round(value: Any) -> Any:
    return round(value, 6) if isinstance(value, float) else value


def _start_wandb(config: RLConfig, run_dir: Path) -> Any:
    try:
        import wandb  # type: ignore[import-not-found]
    except ImportError:
        raise ConfigError("[wandb] is set but wandb is not installed; `pip install wandb` or remove the [wandb] table") from None
    cfg = config.wandb
    assert cfg is not None
    return wandb.init(project=cfg.project, entity=cfg.entity, name=cfg.name or run_dir.name, config=config.model_dump(mode="json"), dir=str(run_dir))


def _truncate_metrics(path: Path, step: int) -> None:
    """On resume, forget metric lines of steps after the checkpoint (they will be redone)."""
    if not path.is_file():
        return
    kept = []
    for line in path.read_text().splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue  # a line cut by a kill
        if isinstance(data, dict) and data.get("step", 0) <= step:
            kept.append(line)
    write_text_atomic(path, "".join(line + "\n" for line in kept))


def run(
    config: RLConfig,
    *,
    output_dir: Path,
    resume: Resume = None,
    skip_baseline: bool = False,
    dry_run: bool = False,
    console: Console | None = None,
) -> RunSummary | None:
    """Plan, check, train. Returns ``None`` for a dry run. The run dir is locked for the whole run."""
    console = console or Console(stderr=True)
    run_dir = run_dir_for(config, output_dir, resume)
    backend = resolve_backend(config)
    if dry_run:
        from evalkit.model.registry import resolve_model

        resolve_model(config.model)  # an unknown model fails here, as it would at the start of a real run
        lines = plan_lines(config, run_dir, backend)  # refuses what the run would refuse, before printing anything
        out = Console()
        out.print(to_toml(config), markup=False, highlight=False, soft_wrap=True)
        out.print("\n".join(["# plan", *lines]), markup=False, highlight=False, soft_wrap=True)
        return None
    if isinstance(resume, Path) and not (resume / "checkpoints").is_dir():
        raise UserError(f"--resume: {resume} is not an RL run dir with checkpoints")
    with runs.RunLock(run_dir):
        notes: list[str] = []
        step = resume_step(run_dir, resume, config, notes)
        for note in notes:
            console.print(note, markup=False, highlight=False)
        if step is None and resume:  # starting over: what the stopped attempt wrote goes
            _truncate_metrics(run_dir / "metrics.jsonl", -1)
        write_text_atomic(run_dir / "config.resolved.toml", to_toml(config))
        for line in plan_lines(config, run_dir, backend):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        trainer = Trainer(config, run_dir, console)
        try:
            trainer.setup(backend)
            last = _start_and_train(trainer, step, skip_baseline)
        finally:
            trainer.close()
    return RunSummary(run_dir=run_dir, steps_done=config.max_steps, last_metrics=last, eval_rewards=trainer.eval_rewards)


def _start_and_train(trainer: Trainer, resume_from: int | None, skip_baseline: bool) -> dict[str, Any]:
    """Restore a checkpoint (resume) or run the baseline checks (new run), then train."""
    from rl_backend.checkpoints import load_checkpoint

    config, run_dir = trainer.config, trainer.run_dir
    start_step, cursor = 0, 0
    if resume_from is not None:
        state = load_checkpoint(run_dir, resume_from, trainer.policy)
        start_step, cursor = resume_from, int(state["cursor"])
        trainer.eval_rewards = {int(k): v for k, v in state.get("eval_rewards", {}).items()}
        _truncate_metrics(run_dir / "metrics.jsonl", resume_from)
        # evals of the checkpoint's own step that finished after it was saved are not redone
        trainer.eval_rewards.update(recorded_evals(run_dir / "metrics.jsonl"))
        trainer.console.print(f"resumed from checkpoint step {resume_from}")
    elif config.baseline.enabled and not skip_baseline:
        trainer.source.sync(trainer.policy, 0)
        trainer.baseline()
    return trainer.train(start_step, cursor)
