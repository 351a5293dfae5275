"""`prime rl run` end to end: resolve, plan, baseline checks, then the training loop.

The loop overlaps generation and training (by default one-step off-policy): while the trainer takes
step n (on rollouts sampled with the weights of step n-2), a worker thread already samples step n+1's
rollouts with the weights of step n-1. ``trainer.async_level`` N lets generation run up to N steps
ahead; 0 (``trainer.on_policy = true``) runs the two strictly one after the other. The sampler's
weights change only between generations (``source.sync``), never under an in-flight request.
"""

from __future__ import annotations

import math
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from evalkit.core import runs
from evalkit.core.aio import LoopThread
from evalkit.core.errors import ConfigError, UserError
from evalkit.core.fileio import remove_inside, write_bytes_atomic, write_text_atomic
from evalkit.core.readback import RL_METRICS_ROW, read_jsonl
from evalkit.core.redact import redact
from evalkit.core.stats import mean as mean_of
from evalkit.core.stats import pstdev
from evalkit.core.types import SamplingArgs
from evalkit.core.untrusted import json_bytes, row_line
from rl_backend.config import RLConfig, to_toml
from rl_backend.cpu_share import CpuShare
from rl_backend.plan import plan_lines, resolve_backend, trainer_device

__all__ = ["RunSummary", "Trainer", "plan_lines", "resolve_backend", "run", "run_dirs"]


@dataclass
class RunSummary:
    run_dir: Path
    steps_done: int
    last_metrics: dict[str, Any]
    eval_rewards: dict[int, float]


def run_dirs(config: RLConfig, output_dir: Path) -> runs.RunDirs:
    """RL's run-dir rules: ``<output>/rl/<run_name>``, else ``<output>/rl/<env>-<UTC timestamp>``; a bare
    ``--resume`` (or ``--resume STEP``) continues ``run_name``'s run, else the newest run of these
    environments; a run dir named by ``--resume`` needs checkpoints; a new run never writes into a dir
    where a run trained (one refused at its baseline checks may be started again)."""
    root = Path(output_dir) / runs.RL_JOB
    slug = "+".join(spec.label for spec in config.env)

    def check(run_dir: Path) -> None:
        if not (run_dir / runs.CHECKPOINTS_DIR).is_dir():
            raise UserError(f"--resume: {run_dir} is not an RL run dir with checkpoints")

    return runs.RunDirs(
        parent=root,
        fixed=root / config.run_name if config.run_name else None,
        new_name=lambda: f"{slug}-{runs.timestamp()}",
        pattern=f"{slug}-*",
        holds_run=runs.is_rl_run,
        check=check,
        taken=lambda run_dir: (
            f"run dir {run_dir} already holds a training run; use --resume, or another run_name / --output-dir"
            if (run_dir / runs.METRICS).exists() or (run_dir / runs.CHECKPOINTS_DIR).exists()
            else None
        ),
        none_found=lambda where: (
            f"--resume found no earlier run of '{slug}' in {where}; pass --resume RUN_DIR, "
            "or drop --resume to start a new run"
        ),
    )


RESUME_FIXED = ("model", "env", "buffer")
"""What a resumed RL run must keep (its checkpoints are of that model, trained on those environments,
whose rows its cursor counts in that mixture)."""


def _check_same_run(run_dir: Path, config: RLConfig) -> None:
    from evalkit.core.tomlio import load_toml

    saved_file = run_dir / runs.RESOLVED_CONFIG
    if saved_file.is_file():
        runs.require_same(
            run_dir,
            load_toml(saved_file),
            config.model_dump(mode="json", exclude_none=True),
            RESUME_FIXED,
            defaults={"buffer": {}},
            hint="resume with the same model, [[env]] tables and [buffer], or start a new run (another run_name)",
        )


def resume_step(resolved: runs.ResolvedRun, config: RLConfig, notes: list[str] | None = None) -> int | None:
    """The checkpoint step to continue from (None: start at step 0); refuses what cannot be resumed.

    A run killed before its first checkpoint starts over from step 0 (baseline included). A run
    whose last checkpoint is at ``max_steps`` but whose final eval or weight export did not finish
    (killed while exporting) resumes at ``max_steps`` and redoes only those; a finished one is refused.
    ``notes`` collects what a person should be told.
    """
    from rl_backend.checkpoints import steps_in

    notes = notes if notes is not None else []
    run_dir, max_steps = resolved.run_dir, config.max_steps
    if not resolved.resuming:
        return None
    _check_same_run(run_dir, config)
    available = steps_in(run_dir / runs.CHECKPOINTS_DIR)
    if not available:
        if resolved.step is not None:
            raise UserError(f"--resume {resolved.step}: no checkpoints in {run_dir / runs.CHECKPOINTS_DIR}; "
                            "pass --resume alone to start it over")
        notes.append(f"--resume: {run_dir} was stopped before its first checkpoint; starting it over from step 0")
        return None
    step = resolved.step if resolved.step is not None else available[-1]
    if step > max_steps or (step == max_steps and not final_work_left(run_dir, config)):
        raise UserError(f"--resume: checkpoint step {step} is already at max_steps ({max_steps}) and its final "
                        "eval and weights are done; raise max_steps to train further")
    if step == max_steps:
        notes.append(f"--resume: training reached max_steps ({max_steps}); finishing the final eval/weight export only")
    return step


def final_work_left(run_dir: Path, config: RLConfig) -> bool:
    """Whether the step-``max_steps`` eval or weight export of a run is missing (it was killed in them)."""
    step = config.max_steps
    weights_missing = config.ckpt.save_weights and not runs.step_dir(run_dir / runs.WEIGHTS_DIR, step).is_dir()
    eval_missing = bool(config.eval.interval) and step not in recorded_evals(run_dir / runs.METRICS)
    return weights_missing or eval_missing


def recorded_evals(path: Path) -> dict[int, float]:
    """``step -> eval_reward`` from metrics.jsonl (a cut last line is ignored, a damaged one skipped with a warning)."""
    return {
        row["step"]: row["eval_reward"]
        for row in read_jsonl(path, RL_METRICS_ROW)
        if row.get("eval_reward") is not None
    }


def _rows_jsonl(groups: list[list[Any]], batch: Any) -> bytes:
    kept = {id(g) for g in batch.kept}
    lines = []
    for group in groups:
        for state in group:
            row = {"env": batch.env_of.get(state.example_id), **state.to_row()}
            row["kept"] = id(group) in kept
            row["advantage"] = batch.advantages.get((state.example_id, state.rollout_idx))
            lines.append(row_line(row)[0])
    return b"".join(lines)


class Trainer:
    """Holds one run's pieces; ``run()`` goes from config to trained weights.

    Every coroutine of the run (training batches, the baseline, periodic evals) goes to one event
    loop that lives as long as the trainer (:class:`evalkit.core.aio.LoopThread`), so the source's client
    (an aiohttp session, the engine's batching queue) stays on one loop.
    """

    def __init__(self, config: RLConfig, run_dir: Path, console: Console | None = None):
        self.config = config
        self.run_dir = run_dir
        self.console = console or Console(stderr=True)
        self.eval_rewards: dict[int, float] = {}
        self.algo_state: dict[str, Any] = {}
        """Each environment's algorithm state after the batch last trained on (``rae``'s baselines), for checkpoints."""
        self._exported: set[int] = set()
        self._template_checked = False
        self._wandb: Any = None
        self.loop: LoopThread | None = None
        self.cpu_share = CpuShare(None, overlap=False, cuda=False)
        """Set by :meth:`train`: the trainer's and the sampler's threads while they overlap."""

    # ----- setup ---------------------------------------------------------------------------------
    def setup(self, backend: str) -> None:
        """Load the environments (here, on the calling thread: legacy verifiers environments install
        signal handlers, which only the main thread may), then the policy, the source and the collector."""
        import torch

        from evalkit.eval.vf_fields import env_tool_defs
        from rl_backend.collect import BatchCollector
        from rl_backend.mixture import EnvMixture, load_train_env
        from rl_backend.policy import Policy
        from rl_backend.sources import make_source

        members = [load_train_env(spec) for spec in self.config.env]
        for member in members:
            if backend == "vllm" and env_tool_defs(member.env) and not self.config.inference.tool_call_parser:
                raise ConfigError(
                    f"environment '{member.spec.id}' offers tools, and a vLLM server returns tool calls "
                    "only with a parser; "
                    "set inference.tool_call_parser (e.g. 'hermes') to the one that fits the model"
                )
        self.mixture = EnvMixture(members, self.config.buffer.env_ratios, self.config.seed)
        self.eval_members = [load_train_env(spec) for spec in self.config.eval.env] if self.config.eval.env else members
        torch.manual_seed(self.config.seed)
        self.policy = Policy(self.config, device=trainer_device(self.config))
        self.teachers = self._teachers()
        self.loop = LoopThread("rl-asyncio")  # no torch work here: the engine decodes on its own thread
        self.source = make_source(backend, self.config, self.policy, self.run_dir)
        engine = getattr(self.source, "engine", None)
        if engine is not None:
            self.console.print(f"sampler      {engine.dtype_choice.line()}", markup=False, highlight=False)
        self.collector = BatchCollector(self.config, self.mixture, self.source, self.loop)
        self.collector.teachers = self.teachers
        self.samplers = self._samplers()
        self.collector.samplers = self.samplers
        if self.config.wandb is not None:
            self._wandb = _start_wandb(self.config, self.run_dir)

    def _teachers(self) -> dict[str, Any]:
        """Each ``opd`` environment's teacher (:mod:`rl_backend.teacher`), checked before any rollout: it answers,
        scores given tokens, shares the policy's tokenizer and is not the policy. One per distinct teacher."""
        from rl_backend.teacher import check_teacher, make_teacher

        made: dict[str, Any] = {}
        out: dict[str, Any] = {}
        for env in self.config.env:
            algo = self.config.algo_of(env)
            if algo.action_component_name() != "ref_kl" or algo.teacher is None:
                continue
            key = algo.teacher.model_dump_json()
            if key not in made:
                where = f"env '{env.label}' algo.teacher" if env.algo is not None else "algo.teacher"
                teacher = make_teacher(algo.teacher, where)
                made[key] = teacher
                try:
                    check_teacher(teacher, self.policy.tokenizer, self.policy.model)
                except BaseException:
                    for held in made.values():
                        held.close()
                    raise
                self.console.print(f"teacher      {teacher.describe()}: scores the policy's tokens", markup=False,
                                   highlight=False)
            out[env.label] = made[key]
        return out

    def _samplers(self) -> dict[str, Any]:
        """Each ``sft`` environment's frozen teacher that samples its rollouts (:mod:`rl_backend.teacher_sampler`),
        checked before any rollout: it answers a chat, returns token ids, and renders it as the policy does. One
        per distinct teacher."""
        from rl_backend.teacher_sampler import TeacherSampler, check_sampler, probe

        assert self.loop is not None
        made: dict[str, Any] = {}
        out: dict[str, Any] = {}
        for env in self.config.env:
            algo = self.config.algo_of(env)
            source = algo.sampling.source
            if source == "policy":
                continue
            key = source.model_dump_json()
            if key not in made:
                where = f"env '{env.label}' algo.sampling.source" if env.algo is not None else "algo.sampling.source"
                sampler = TeacherSampler(source, where, dtype=self.config.inference.dtype,
                                         device=trainer_device(self.config),
                                         max_batch=self.config.inference.max_batch_size)
                made[key] = sampler
                try:
                    check_sampler(self.loop.run(probe(sampler)), sampler, self.policy.tokenizer)
                except BaseException:
                    for held in made.values():
                        self.loop.run(held.aclose())
                        held.close()
                    raise
                self.console.print(f"teacher      {sampler.describe()}: samples the rollouts the policy imitates",
                                   markup=False, highlight=False)
            out[env.label] = made[key]
        return out

    # ----- baseline and evals: eval run dirs inside the run -----------------------------------------
    def eval_dir(self, name: str, member: Any, members: list[Any] | None = None) -> str:
        """``name`` for a single environment, ``name/<env label>`` for each of several."""
        return name if len(members or self.mixture.members) == 1 else f"{name}/{member.name}"

    def run_eval(self, name: str, sampling: SamplingArgs, member: Any, client: Any = None, model: str | None = None,
                 **settings: Any) -> Any:
        """An eval of the current weights (or of ``client``, a teacher's, named ``model``) on one environment into
        ``<run>/<name>/`` (results.jsonl, metadata.json, the summary), through the eval runner with the source's
        client on the run's loop. What an earlier attempt left there (a run resumed from an older checkpoint) is
        replaced."""
        from evalkit.eval.config import EvalConfig
        from evalkit.eval.runner import arun_eval
        from evalkit.vocabulary import ConcurrencyFields, RolloutBounds, shared_fields

        if self.loop is None:
            raise RuntimeError("Trainer.setup() must run first")
        spec = member.spec
        eval_dir = self.run_dir / name
        remove_inside(eval_dir, self.run_dir)
        config = EvalConfig(
            env_id=spec.id,
            env_args=spec.args,
            model=model or self.config.model,
            **shared_fields(self.config, RolloutBounds, ConcurrencyFields),
            system_prompt=self.config.system_prompt,
            sampling=sampling.to_dict(),
            shuffle=True,
            output_dir=str(self.run_dir),
            run_dir=str(eval_dir),
            preflight=False,
            **settings,
        )
        return self.loop.run(arun_eval(config, client=client or self.source.client, env=member.env))

    def baseline(self) -> dict[str, Any]:
        """The baseline checks on training examples of each environment (``<run>/baseline/[<env>/]``,
        ``baseline.json``); refuses when any environment fails them, naming it."""
        from rl_backend.baseline import run_checks

        cfg = self.config.baseline
        rpe = self.config.baseline_rollouts
        if cfg.check:
            from rl_backend.env_check_gate import run_env_checks

            run_env_checks([(m.name, m.spec.id, m.spec.args, m.env) for m in self.mixture.members], self.run_dir,
                           self.console)

        def evaluate(member: Any) -> Any:
            result = self.run_eval(
                self.eval_dir(runs.BASELINE_DIR, member),
                self.collector.sampling,
                member,
                split="train",
                num_examples=cfg.num_examples,
                rollouts_per_example=rpe,
                seed=self.config.seed + 1,
            )
            self.check_template(result.states)  # real multi-turn rollouts, before any training step
            return result

        from rl_backend.plan import rewarded_envs

        judged = set(rewarded_envs(self.config))
        members = [m for m in self.mixture.members if m.name in judged]
        if not members:
            return {}
        return run_checks([(m.name, lambda m=m: evaluate(m)) for m in members], cfg, rpe, self.run_dir, self.console)

    # ----- evaluation / export at sync points ----------------------------------------------------
    def evaluate(self, step: int) -> dict[str, float]:
        """Held-out eval of step ``step``'s weights on each environment (``[[eval.env]]``, else the training
        environments' eval splits) into ``<run>/evals/step_N/[<env>/]``.

        Returns the metrics line: ``eval_reward`` (the mean of the environments' mean rewards) and,
        with several environments, ``eval_reward/<env>`` for each; and prime-rl's ``eval/<env>/...`` names.
        """
        self.source.reseed(_eval_seed(self.config.seed))
        line = self.held_out(f"{runs.EVALS_DIR}/step_{step}", [(m, None) for m in self.eval_members])
        self.eval_rewards[step] = line["eval_reward"]
        return line

    def held_out(self, folder: str, pairs: list[tuple[Any, Any]]) -> dict[str, float]:
        """The held-out eval's metrics line over ``(member, teacher sampler or None for the policy)`` pairs."""
        from rl_backend.prime_metrics import eval_metrics

        cfg = self.config.eval
        sampling = self.collector.sampling
        if cfg.temperature is not None:
            sampling = sampling.merged({"temperature": cfg.temperature})
        means: dict[str, float] = {}
        named: dict[str, float] = {}
        self.eval_counts: dict[str, int] = {}
        members = [member for member, _ in pairs]
        for member, teacher in pairs:
            if teacher is not None:
                teacher.reseed(_eval_seed(self.config.seed))
            result = self.run_eval(self.eval_dir(folder, member, members), sampling, member,
                                   client=teacher.client if teacher is not None else None,
                                   model=teacher.config.name if teacher is not None else None,
                                   num_examples=cfg.num_examples, rollouts_per_example=cfg.rollouts_per_example,
                                   seed=self.config.seed)
            means[member.name] = float(result.summary["avg_reward"] or 0.0)
            self.eval_counts[member.name] = int(result.metadata["num_examples"])
            named |= eval_metrics(member.name, result.states, cfg.rollouts_per_example)
        self.eval_examples = sum(self.eval_counts.values())
        return {
            "eval_reward": mean_of(means.values()),
            **({f"eval_reward/{k}": v for k, v in means.items()} if len(means) > 1 else {}),
            **named,
        }

    def evaluate_teachers(self) -> None:
        """Once, before step 1 of a run with a held-out eval: the same eval (examples, sampling, seed) of each
        environment's teacher (``opd``'s or ``sft``'s), into ``<run>/evals/teacher/`` and metrics.jsonl's step 0 as
        ``teacher/<eval name>``: the score the student is distilled toward. An ``sft`` teacher is evaluated through
        the client that samples its rollouts; an ``opd`` teacher (a scorer) through a chat client made for it."""
        from rl_backend.teacher_eval import held_out_teachers
        from rl_backend.teacher_sampler import TeacherSampler

        if not (self.config.eval.interval or self.config.eval.at_start):
            return
        chosen = held_out_teachers(self.config, [m.name for m in self.eval_members])
        if not chosen:
            return
        assert self.loop is not None
        known = {s.config.model_dump_json(): s for s in self.samplers.values()}
        made: list[Any] = []
        pairs: list[tuple[Any, Any]] = []
        try:
            for member in self.eval_members:
                if member.name not in chosen:
                    continue
                frozen, where = chosen[member.name]
                key = frozen.model_dump_json()
                if key not in known:
                    known[key] = TeacherSampler(frozen, where, dtype=self.config.inference.dtype,
                                                device=trainer_device(self.config),
                                                max_batch=self.config.inference.max_batch_size)
                    made.append(known[key])
                pairs.append((member, known[key]))
            line = self.held_out(f"{runs.EVALS_DIR}/teacher", pairs)
        finally:
            for sampler in made:
                self.loop.run(sampler.aclose())
                sampler.close()
        for member, sampler in pairs:
            reward = line.get(f"eval_reward/{member.name}", line["eval_reward"])
            self.console.print(f"teacher held-out reward on {member.name}: {reward:.3f} "
                               f"({self.eval_counts[member.name]} examples; {sampler.config.name})",
                               markup=False, highlight=False, soft_wrap=True)
        named = {f"teacher/{k}": v for k, v in line.items()}
        self._append_metrics({"step": 0, **named})
        if self._wandb is not None:
            self._wandb.log(named, step=0)

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
            per_env = "".join(
                f", {k.split('/', 1)[1]} {v:.3f}" for k, v in line.items() if k.startswith("eval_reward/")
            )
            self.console.print(
                f"eval step {step}: mean reward {line['eval_reward']:.3f}{per_env} "
                f"on {self.eval_examples} held-out examples"
            )
            self._append_metrics({"step": step, **line})
            if self._wandb is not None:
                self._wandb.log(line, step=step)
        due = cfg.ckpt.interval and step % cfg.ckpt.interval == 0
        exported = runs.step_dir(self.run_dir / runs.WEIGHTS_DIR, step).is_dir()
        if (
            (step > start_step or not exported)
            and cfg.ckpt.save_weights
            and (due or final)
            and step not in self._exported
        ):
            model = getattr(self.source, "export_model", None)
            if model is not None:
                export_weights(self.run_dir, step, model(), self.policy.tokenizer)
                prune(self.run_dir / runs.WEIGHTS_DIR, cfg.ckpt.keep_last)
                self._exported.add(step)

    # ----- the loop ------------------------------------------------------------------------------
    def train(self, start_step: int, cursor: int) -> dict[str, Any]:
        """Train from ``start_step`` (data ``cursor``) to ``max_steps``; see :class:`Pipeline` for the overlap.

        The sampler takes the trainer's weights only while it is idle (a sync point): with
        ``async_level`` N >= 1 whenever it has generated every batch it was given, then it is given the
        next N; on-policy (0) after every step. A periodic eval or weight export due at a step that is no
        sync point waits for the sampler to finish what it has, so it sees exactly that step's weights.
        """
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        cfg = self.config
        level = cfg.trainer.async_level
        last: dict[str, Any] = {}
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rl-rollouts")
        pipeline = Pipeline(executor, self.collector)
        step = start_step
        self.health = _health_monitor(self.run_dir / runs.METRICS)
        self.source.sync(self.policy, step)
        if step == 0:
            self.evaluate_teachers()
        self.at_sync_point(step, start_step, final=False)
        self.cpu_share = CpuShare(getattr(self.source, "engine", None), overlap=level > 0, drain=pipeline.drain)
        pipeline.submit(step + 1, step, min(max(1, level), cfg.max_steps - step), cursor)
        columns = (
            TextColumn("[bold]step {task.completed}/{task.total}"),
            BarColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
        )
        try:
            with Progress(*columns, console=self.console, transient=False) as progress:
                task = progress.add_task("", total=cfg.max_steps, completed=step)
                while step < cfg.max_steps:
                    batch, wait_s = pipeline.next()
                    self.algo_state = batch.algo_state
                    step_started = time.perf_counter()
                    if level and pipeline.idle:
                        self.source.sync(self.policy, step)
                        self.at_sync_point(step, start_step, final=False)
                        pipeline.submit(step + 2, step, min(level, cfg.max_steps - step - 1), batch.cursor_after)
                    last = self.train_one(batch, step + 1, wait_s, step_started)
                    step += 1
                    if not level:
                        self.source.sync(self.policy, step)
                        self.at_sync_point(step, start_step, final=step == cfg.max_steps)
                        pipeline.submit(step + 1, step, min(1, cfg.max_steps - step), batch.cursor_after)
                    elif level > 1 and step < cfg.max_steps and self.due_at(step):
                        pipeline.drain()
                        self.source.sync(self.policy, step)
                        self.at_sync_point(step, start_step, final=False)
                    self.maybe_checkpoint(step, batch.cursor_after)
                    progress.update(
                        task, completed=step, description=f"reward {last['reward_mean']:.3f} loss {last['loss']:+.4f}"
                    )
                    progress.console.print(
                        f"step {step:>4}  reward {last['reward_mean']:.3f}  "
                        f"kept {last['groups_kept']}/{last['groups_generated']}  "
                        f"loss {last['loss']:+.5f}  entropy {last['entropy']:.3f}  kl {last['mismatch_kl']:.2e}  "
                        + (f"ref_kl {last['ref_kl']:+.4f}  " if "ref_kl" in last else "")
                        + (f"ce {last['ce']:.4f}  " if "ce" in last else "")
                        + f"gen {last['gen_s']:.1f}s{_rounds_note(last)}  train {last['train_s']:.1f}s  "
                        f"wait {last['wait_s']:.1f}s"
                    )
                    self.check_health(last, step, batch.cursor_after, progress.console)
        finally:
            executor.shutdown(wait=True, cancel_futures=True)
        self.source.sync(self.policy, step)
        self.at_sync_point(step, start_step, final=True)
        return last

    def check_health(self, metrics: dict[str, Any], step: int, cursor: int, console: Console) -> None:
        """Print each new health alarm once with its fix; on one named in ``health.halt_on``, save the step's
        checkpoint (its metrics line is written already) and stop the run with :class:`RunHalted`."""
        from rl_backend.checkpoints import save_checkpoint, steps_in

        alarms = self.health.step(metrics)
        for alarm in alarms:
            console.print(alarm.line(), markup=False, highlight=False, soft_wrap=True)
        halting = [alarm.name for alarm in alarms if alarm.name in self.config.health.halt_on]
        if not halting:
            return
        if step not in steps_in(self.run_dir / runs.CHECKPOINTS_DIR):
            save_checkpoint(self.run_dir, step, self.policy, self._checkpoint_state(cursor))
        raise RunHalted(f"run halted at step {step} on health alarm {', '.join(halting)} (--halt-on); checkpoint and "
                        f"metrics saved in {self.run_dir}: fix what the alarm says, then continue with --resume or "
                        "start over")

    def due_at(self, step: int) -> bool:
        """Whether a periodic eval or weight export falls on ``step``."""
        cfg = self.config
        evals = bool(cfg.eval.interval) and step % cfg.eval.interval == 0
        weights = bool(cfg.ckpt.interval) and cfg.ckpt.save_weights and step % cfg.ckpt.interval == 0
        return evals or weights

    def check_template(self, states: list[Any]) -> None:
        """The prefix-property check (:mod:`rl_backend.trajectories`) on the first real multi-turn rollouts,
        before any optimizer step: refused for ``interleaved`` (unless ``retokenize``), else a note."""
        from rl_backend.trajectories import check_prefix_property, describe_break, refusal

        if self._template_checked:
            return
        checked, found = check_prefix_property(states)
        if not checked:
            return  # no multi-turn rollout yet: look again at the next ones
        self._template_checked = True
        cfg, tokenizer = self.config, self.policy.tokenizer
        if found is None:
            self.console.print(
                f"chat template: {checked} multi-turn rollouts checked, each turn's prompt extends the last"
            )
            return
        if cfg.trajectory_strategy == "interleaved" and not cfg.retokenize:
            raise refusal(found, tokenizer, cfg.model)
        how = (
            "branching trains each turn after the prompt it saw, so training stays exact"
            if cfg.trajectory_strategy == "branching"
            else "retokenize: a rollout's sample restarts at each re-rendered turn"
        )
        self.console.print(f"note: {describe_break(found, tokenizer, cfg.model)}; {how}", markup=False, highlight=False)

    def train_one(self, batch: Any, step: int, wait_s: float, step_started: float) -> dict[str, Any]:
        from rl_backend.collect import to_samples
        from rl_backend.trajectories import interleave

        self.check_template([state for group in batch.kept for state in group])
        if self.config.trajectory_strategy == "interleaved":
            samples = interleave(batch.kept, batch.advantages, retokenize=self.config.retokenize,
                                 tokenizer=self.policy.tokenizer, model=self.config.model, env_of=batch.env_of,
                                 echo_roles=batch.echo_roles)
        else:
            samples = to_samples(batch, self.policy.tokenizer)
        train_started = time.perf_counter()
        with self.cpu_share.training():
            stats = self.policy.train_step(samples, step)
        train_s = time.perf_counter() - train_started - self.cpu_share.drained_s  # a serial step's wait is waiting
        rewards = [s.reward for g in batch.generated for s in g if s.scored]  # errors are not scores
        generated = len(batch.generated)
        metrics = {
            "step": step,
            "reward_mean": mean_of(rewards) if rewards else 0.0,
            "reward_std": pstdev(rewards),
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
            "wait_s": wait_s + self.cpu_share.drained_s,
            "step_s": time.perf_counter() - step_started + wait_s,
        }
        metrics |= self.prime_rl_names(batch, metrics)
        if not math.isfinite(metrics["loss"]):
            raise UserError(
                f"step {step}: the loss is not finite ({metrics['loss']}); lower trainer.lr or use trainer.bf16 = false"
            )
        self._append_metrics(metrics)
        (self.run_dir / runs.ROLLOUTS_DIR).mkdir(exist_ok=True)
        write_bytes_atomic(
            self.run_dir / runs.ROLLOUTS_DIR / f"{runs.step_name(step)}.jsonl", _rows_jsonl(batch.generated, batch)
        )
        if self._wandb is not None:
            self._wandb.log(
                {**metrics, "samples": _samples_table(step, batch, self.mixture.members[0].name)}, step=step
            )
        return metrics

    def prime_rl_names(self, batch: Any, metrics: dict[str, Any]) -> dict[str, float]:
        """The step's metrics under prime-rl's names (:mod:`rl_backend.prime_metrics`), beside the old ones."""
        from rl_backend.prime_metrics import rollout_metrics, trainer_metrics

        return rollout_metrics(
            batch.generated, batch.kept, batch.env_of, self.mixture.members[0].name
        ) | trainer_metrics(metrics)

    def _checkpoint_state(self, cursor: int) -> dict[str, Any]:
        """What ``state.json`` keeps beside the weights: the data cursor, the evals so far, the algorithms' state."""
        return {"cursor": cursor, "eval_rewards": self.eval_rewards, "algorithms": self.algo_state}

    def maybe_checkpoint(self, step: int, cursor: int) -> None:
        from rl_backend.checkpoints import prune, save_checkpoint

        cfg = self.config.ckpt
        if (cfg.interval and step % cfg.interval == 0) or step == self.config.max_steps:
            save_checkpoint(self.run_dir, step, self.policy, self._checkpoint_state(cursor))
            prune(self.run_dir / runs.CHECKPOINTS_DIR, cfg.keep_last)

    def _append_metrics(self, metrics: dict[str, Any]) -> None:
        with (self.run_dir / runs.METRICS).open("ab") as handle:
            handle.write(json_bytes({k: _round(v) for k, v in metrics.items()}) + b"\n")
            handle.flush()

    def close(self) -> None:
        """Close the client on its loop, then the source, the loop and W&B (each even if another fails)."""
        source = getattr(self, "source", None)
        for teacher in {id(t): t for t in getattr(self, "teachers", {}).values()}.values():
            teacher.close()
        for sampler in {id(t): t for t in getattr(self, "samplers", {}).values()}.values():
            if self.loop is not None:
                self.loop.run(sampler.aclose())
            sampler.close()
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


class Pipeline:
    """Training batches generated ahead, in step order, on one worker thread.

    Each batch starts at the data cursor the previous one ended at (known only once that one is
    done: filtering draws a variable number of examples), so a batch's start is read on the worker,
    which runs them one after the other.
    """

    def __init__(self, executor: ThreadPoolExecutor, collector: Any):
        self.executor = executor
        self.collector = collector
        self.pending: deque[Future] = deque()

    def submit(self, first_step: int, weights_step: int, count: int, cursor: int) -> None:
        """Queue batches for steps ``first_step .. first_step + count - 1``, sampled with the weights of
        ``weights_step``."""
        for step in range(first_step, first_step + count):
            previous = self.pending[-1] if self.pending else None

            def collect(step: int = step, previous: Future | None = previous) -> Any:
                start = previous.result().cursor_after if previous is not None else cursor
                return self.collector.collect(step, start, weights_step)

            self.pending.append(self.executor.submit(collect))

    def next(self) -> tuple[Any, float]:
        """The oldest batch (waiting for it) and the seconds waited."""
        started = time.perf_counter()
        batch = self.pending.popleft().result()
        return batch, time.perf_counter() - started

    @property
    def idle(self) -> bool:
        """Every batch given to the worker has been taken: it is between generations."""
        return not self.pending

    def drain(self) -> None:
        """Wait until the worker has generated everything queued (the batches stay queued)."""
        for future in list(self.pending):
            future.result()


class RunHalted(UserError):
    """``--halt-on``: a chosen health alarm stopped the run, everything up to its step saved."""


def _eval_seed(seed: int) -> int:
    """The sampler's seed for every held-out eval (the policy's at each step, the teacher's once): the same draws."""
    return seed * 31 + 17


def _health_monitor(metrics_file: Path) -> Any:
    """A health monitor that has seen the run's training steps so far (a resumed run's, up to its checkpoint)."""
    from evalkit.report.rl_health import Monitor

    rows = read_jsonl(metrics_file, RL_METRICS_ROW) if metrics_file.is_file() else []
    return Monitor([row for row in rows if "loss" in row])


def _samples_table(step: int, batch: Any, default_env: str) -> Any:
    """The step's W&B ``samples`` table: a few rollouts with prompt, completion, reward and advantage."""
    import wandb  # type: ignore[import-not-found]

    from rl_backend.prime_metrics import SAMPLE_COLUMNS, sample_rows

    rows = sample_rows(step, batch.kept or batch.generated, batch.env_of, default_env, batch.advantages)
    return wandb.Table(columns=SAMPLE_COLUMNS, data=rows)


def _rounds_note(metrics: dict[str, Any]) -> str:
    """`` (N rounds)`` when the difficulty filter rolled out replacement groups: generation then did
    N times the rollouts of one batch, which is why its time is a multiple of an eval's."""
    rounds = metrics.get("rounds", 1)
    return f" ({rounds} rounds)" if rounds > 1 else ""


def _reward_by_env(batch: Any) -> dict[str, float]:
    """``reward_mean/<env>`` over the step's generated rollouts, for each environment that had some."""
    by_env: dict[str, list[float]] = {}
    for group in batch.generated:
        for state in group:
            by_env.setdefault(batch.env_of.get(state.example_id, "?"), []).append(state.reward)
    return {f"reward_mean/{name}": mean_of(values) for name, values in by_env.items()}


def _round(value: Any) -> Any:
    return round(value, 6) if isinstance(value, float) else value


def _start_wandb(config: RLConfig, run_dir: Path) -> Any:
    try:
        import wandb  # type: ignore[import-not-found]
    except ImportError:
        raise ConfigError(
            "[wandb] is set but wandb is not installed; `pip install wandb` or remove the [wandb] table"
        ) from None
    cfg = config.wandb
    assert cfg is not None
    return wandb.init(
        project=cfg.project,
        entity=cfg.entity,
        name=cfg.name or run_dir.name,
        config=config.model_dump(mode="json"),
        dir=str(run_dir),
    )


def _truncate_metrics(path: Path, step: int) -> None:
    """On resume, forget metric lines of steps after the checkpoint (they will be redone)."""
    if not path.is_file():
        return
    kept = [
        row for row in read_jsonl(path, RL_METRICS_ROW) if row["step"] <= step
    ]  # damaged lines: a warning, then gone
    write_bytes_atomic(path, b"".join(json_bytes(row) + b"\n" for row in kept))


def run(
    config: RLConfig,
    *,
    output_dir: Path,
    resume: runs.ResumeRequest | None = None,
    skip_baseline: bool = False,
    dry_run: bool = False,
    console: Console | None = None,
) -> RunSummary | None:
    """Plan, check, train. Returns ``None`` for a dry run. The run dir is locked for the whole run."""
    console = console or Console(stderr=True)
    resolved = runs.resolve_run(run_dirs(config, output_dir), resume or runs.ResumeRequest())
    run_dir = resolved.run_dir
    if dry_run:
        from evalkit.model.registry import resolve_model

        resolve_model(config.model)  # an unknown model fails here, first, as it would at the start of a real run
        backend = resolve_backend(config)
        lines = plan_lines(config, run_dir, backend)  # refuses what the run would refuse, before printing anything
        out = Console()
        out.print(redact(to_toml(config)), markup=False, highlight=False, soft_wrap=True)  # env args may hold secrets
        out.print(redact("\n".join(["# plan", *lines])), markup=False, highlight=False, soft_wrap=True)
        return None
    backend = resolve_backend(config)
    with runs.RunLock(run_dir):
        notes = list(resolved.notes)
        step = resume_step(resolved, config, notes)
        for note in notes:
            console.print(note, markup=False, highlight=False)
        if step is None and resolved.resuming:  # starting over: what the stopped attempt wrote goes
            _truncate_metrics(run_dir / runs.METRICS, -1)
        write_text_atomic(run_dir / runs.RESOLVED_CONFIG, to_toml(config))
        for line in plan_lines(config, run_dir, backend):
            console.print(redact(line), markup=False, highlight=False, soft_wrap=True)
        trainer = Trainer(config, run_dir, console)
        try:
            trainer.setup(backend)
            last = _start_and_train(trainer, step, skip_baseline)
        finally:
            trainer.close()
    return RunSummary(
        run_dir=run_dir, steps_done=config.max_steps, last_metrics=last, eval_rewards=trainer.eval_rewards
    )


def _start_and_train(trainer: Trainer, resume_from: int | None, skip_baseline: bool) -> dict[str, Any]:
    """Restore a checkpoint (resume) or run the baseline checks (new run), then train."""
    from rl_backend.checkpoints import load_checkpoint

    config, run_dir = trainer.config, trainer.run_dir
    start_step, cursor = 0, 0
    if resume_from is not None:
        state = load_checkpoint(run_dir, resume_from, trainer.policy)
        start_step, cursor = resume_from, int(state["cursor"])
        trainer.eval_rewards = {int(k): v for k, v in state.get("eval_rewards", {}).items() if k.isdigit()}
        trainer.collector.load_state_dict(state.get("algorithms", {}))
        trainer.algo_state = state.get("algorithms", {})
        _truncate_metrics(run_dir / runs.METRICS, resume_from)
        # evals of the checkpoint's own step that finished after it was saved are not redone
        trainer.eval_rewards.update(recorded_evals(run_dir / runs.METRICS))
        trainer.console.print(f"resumed from checkpoint step {resume_from}")
    elif config.baseline.enabled and not skip_baseline:
        trainer.source.sync(trainer.policy, 0)
        trainer.baseline()
    return trainer.train(start_step, cursor)
