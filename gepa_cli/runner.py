"""One GEPA job, start to finish: environments, data, clients, the library loop, the run directory.

``run_gepa(config)`` is the only entry point; the CLI parses flags into a :class:`GepaJobConfig` and
calls it. Tests pass ``clients=`` (scripted task and teacher models) and ``envs=`` to skip the
registry. What this wraps around ``gepa.optimize`` and why is in :mod:`.budget` (honest budget),
:mod:`.adapter` (resume without re-spending, reflection failures that fail the run) and
:mod:`.reflection` (the teacher).
"""

from __future__ import annotations

import json
import shlex
import time
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from evalkit.clients.base import ModelClient
from evalkit.clients.routing import is_embedded
from evalkit.core import runs
from evalkit.core.aio import LoopThread
from evalkit.core.errors import UserError
from evalkit.core.fileio import write_json_atomic
from evalkit.core.readback import GEPA_METADATA, read_object
from evalkit.core.redact import redact
from evalkit.core.runs import detect_kind
from evalkit.core.types import SamplingArgs
from evalkit.core.untrusted import json_bytes
from evalkit.envs.base import Environment
from gepa_cli import outputs
from gepa_cli.adapter import COMPONENT, SystemPromptAdapter
from gepa_cli.background import BackgroundWriter, StateSaver, Throttle
from gepa_cli.budget import BudgetExceeded, BudgetStopper, FatalStopper, RolloutBudget, StopAtScoreStopper
from gepa_cli.components import ENV_PROMPT, FILES, TOOLS, check_text, seed_candidate
from gepa_cli.config import GepaJobConfig
from gepa_cli.data import build_examples
from gepa_cli.progress import FileLogger, ProgressReporter
from gepa_cli.reflection import Proposer, ReflectionError, ReflectionLM
from gepa_cli.saved_state import STATE_FILE, check_state_file
from gepa_cli.secret_mask import SecretMask
from gepa_cli.stoppers import (
    Named,
    ReflectionCost,
    StopRecord,
    check_stop_files,
    clear_stop_files,
    optional_stoppers,
    price_of,
    stop_files,
)
from gepa_cli.tracking import check_installed, tracking_kwargs


@dataclass
class GepaOutcome:
    """What the run ended with (also in ``metadata.json``)."""

    run_dir: Path
    status: str
    seed_val_score: float
    best_val_score: float
    best_idx: int
    num_candidates: int
    total_metric_calls: int
    num_reflection_calls: int
    duration_s: float

    @property
    def system_prompt_path(self) -> Path:
        return self.run_dir / runs.SYSTEM_PROMPT


class _StateTracker:
    """Keeps the newest in-memory state and has the writer thread rewrite the candidate files after an
    iteration that added a candidate (their content depends only on the candidates; an iteration whose
    proposal was rejected would rewrite the same bytes), at most once per ``SAVE_EVERY_S``
    (:mod:`gepa_cli.background`); the run's end writes them all."""

    def __init__(self, run_dir: Path, adapter: SystemPromptAdapter, writer: BackgroundWriter):
        self.run_dir = run_dir
        self.state: Any = None
        self.ended = False
        """gepa's loop ended by itself (a stopper): ``state`` is its final state."""
        self.adapter = adapter
        self.writer = writer
        self.written = 0
        """How many candidates the files on disk (or queued for it) hold."""
        self.queued: Future[None] | None = None
        self.throttle = Throttle(wait_first=True)

    def on_valset_evaluated(self, event: Any) -> None:
        self.adapter.discovered_at_calls.setdefault(int(event["candidate_idx"]), self.adapter.budget.used)

    def on_iteration_end(self, event: Any) -> None:
        self.state = event["state"]
        self.adapter.budget.checkpoint()  # queues the next reservation when the one after next may pass it
        if len(self.state.program_candidates) != self.written and self.throttle.due():
            candidates = outputs.Candidates.of(self.state, self.adapter.discovered_at_calls)
            self.queued = self.writer.submit(outputs.write_candidates, self.run_dir, candidates)
            self.written = len(self.state.program_candidates)

    def supersede(self) -> None:
        """Drop the candidate files queued last if they have not started (the caller writes newer ones),
        else wait for them (raising the error of a failed write)."""
        if self.queued is not None and not self.queued.cancel():
            self.queued.result()

    def on_optimization_end(self, event: Any) -> None:
        self.state = event["final_state"]
        self.ended = True


def _caught(call: Any) -> BaseException | None:
    """``call()``'s exception (None when it returned)."""
    try:
        call()
    except Exception as exc:
        return exc
    return None


def load_envs(config: GepaJobConfig) -> list[Environment]:
    from evalkit.loading.kwargs import apply_extra_env_kwargs
    from evalkit.loading.resolve import load_environment

    envs = []
    for spec in config.envs:
        env = load_environment(spec.id, spec.args, environments_dir=config.env_dir_path)
        apply_extra_env_kwargs(env, spec.extra_env_kwargs, spec.id)
        envs.append(env)
    return envs


def open_clients(config: GepaJobConfig) -> tuple[ModelClient, ModelClient]:
    """Task and teacher clients from their specs (``--max-retries``/``--timeout`` included); one
    shared client when they are the same model."""
    from evalkit.clients.factory import make_client

    task = make_client(config.task_spec())
    if config.teacher == config.model:
        return task, task
    return task, make_client(config.teacher_spec())


async def _preflight(client: ModelClient) -> None:
    from evalkit.clients.factory import preflight

    await preflight(client)


def _taken(run_dir: Path) -> str:
    """Why a new run may not start in ``run_dir``, which holds a run (of GEPA or of another job)."""
    kind = detect_kind(run_dir)
    if kind == "gepa":
        # even a run killed before its first save has spent rollouts; only --resume may add to its count
        return f"{run_dir} already holds a GEPA run; continue it with --resume {run_dir} or pick another -o"
    return (
        f"{run_dir} holds an {(kind or '').upper() if kind in ('rl', 'sft') else kind} run, not a GEPA run; "
        "-o names the GEPA run's own "
        "folder: pick a new or empty one (or leave -o out)"
    )


def run_dirs(config: GepaJobConfig | None) -> runs.RunDirs:
    """GEPA's run-dir rules: ``<root>/gepa/<env>--<model>/<run-id>/`` or ``-o``; a bare ``--resume``
    continues the newest run there; a new run never writes into a dir that holds one. Without a config
    only a named ``--resume RUN_DIR`` resolves (its saved config is read from it)."""

    def check(run_dir: Path) -> None:
        if not runs.has_metadata(run_dir):
            raise UserError(f"--resume: {run_dir} is not a GEPA run directory (no {runs.METADATA})")

    if config is None:
        return runs.RunDirs(parent=None, holds_run=runs.has_metadata, check=check)
    label, model = config.env_label, config.model
    return runs.RunDirs(
        parent=runs.runs_parent(config.runs_root, runs.GEPA_JOB, [spec.id for spec in config.envs], model),
        fixed=Path(config.run_dir) if config.run_dir else None,
        holds_run=lambda path: path.is_dir() and detect_kind(path) is not None,
        check=check,
        taken=_taken,
        none_found=lambda where: (
            f"--resume: no earlier run of {label} with {model} in {where}; pass the run directory: --resume PATH"
        ),
    )


def saved_config(resolved: runs.ResolvedRun) -> dict[str, Any]:
    """The job config recorded when the run started (what ``--resume`` continues).

    It is ``job_config`` in metadata.json (``config`` is verifiers' run summary); runs written before
    that rename kept it in ``config``.
    """
    data, run_dir = resolved.metadata, resolved.run_dir
    if data is None:
        raise UserError(f"--resume: cannot read {run_dir / runs.METADATA}; is it a GEPA run dir?")
    saved = data.get("job_config") or data.get("config") or {}
    if "max_calls" not in saved:
        kind = detect_kind(run_dir)
        what = (
            f"holds an {(kind or '').upper() if kind in ('rl', 'sft') else kind} run, not a GEPA run"
            if kind != "gepa"
            else "was not written by prime gepa run"
        )
        raise UserError(f"--resume: {run_dir} {what} (no job_config in its {runs.METADATA})")
    return dict(saved)


def run_gepa(
    config: GepaJobConfig,
    *,
    resume: runs.ResolvedRun | runs.ResumeRequest | str | Path | bool | None = None,
    clients: tuple[ModelClient, ModelClient] | None = None,
    envs: list[Environment] | None = None,
    console: Console | None = None,
    verbose: bool = False,
    show_progress: bool = True,
    dry_run: bool = False,
) -> GepaOutcome | None:
    """Optimize the shared system prompt of ``config.envs``; raises UserError for anything a user can fix.

    Before any model call: the budget preflight (:mod:`.preflight`) prints what the budget buys and
    refuses one that buys nothing. ``dry_run`` prints the plan and returns None. ``resume``: the run dir
    the CLI resolved (:func:`evalkit.core.runs.resolve_run` with :func:`run_dirs`), or a ``--resume`` value
    to resolve here.
    """
    from gepa_cli.preflight import budget_plan, dry_run_lines

    console = console or Console(stderr=True)
    envs = envs if envs is not None else load_envs(config)
    env_ids = [spec.id for spec in config.envs]
    train, val = build_examples(envs, env_ids, config.num_train, config.num_val, config.seed)
    if not isinstance(resume, runs.ResolvedRun):
        resume = runs.resolve_run(run_dirs(config), runs.ResumeRequest.parse(resume))
    run_dir, resuming = resume.run_dir, resume.resuming
    plan = budget_plan(config, val, run_dir, resuming)
    check_installed(config)
    seed_candidate(
        envs, config.components, [spec.id for spec in config.envs]
    )  # a component the environments lack is refused before anything is written
    if config.max_reflection_cost is not None:  # an unpriced teacher is refused before anything is written
        price_of(config.teacher, config.reflection_prices, free=is_embedded(config.teacher_spec()))
    if dry_run:
        for line in dry_run_lines(config, envs, train, val, run_dir, plan):
            console.print(redact(line), highlight=False, markup=False, soft_wrap=True)  # env args may hold secrets
        if plan.max_proposals == 0 or plan.warning():
            console.print(f"  {plan.warning() or 'error: this budget buys no proposal'}", highlight=False, markup=False)
        return None
    if not resuming:  # a resumed run whose budget is spent just ends (nothing more is spent)
        plan.check()
    else:  # before metadata.json and budget.json are rewritten
        check_stop_files(stop_files(run_dir))
    _say(console, plan.line(), markup=False)
    if plan.warning():
        _say(console, plan.warning(), style="yellow", markup=False)
    with runs.RunLock(run_dir):  # one process per run dir, for the whole run
        _say(
            console,
            f"gepa: [bold]{config.env_label}[/bold] · model {config.model} · teacher {config.teacher} · "
            f"budget {config.max_calls} rollouts · train {len(train)} · val {len(val)}"
            + (f" · resuming {run_dir}" if resuming else ""),
        )
        job = _Job(config, envs, resume, console, verbose, num_val=len(val), seed_cost=plan.seed_cost)
        status, error = "failed", None
        try:
            status = job.optimize(train, val, clients, show_progress)
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        except ReflectionError as exc:
            error = exc
            raise UserError(str(exc)) from None
        except Exception as exc:
            error = exc
            raise
        finally:
            job.finish(status, error)
        return job.outcome(status)


def _say(console: Console, text: str, **style: Any) -> None:
    """``console.print`` without highlighting, and no work for a quiet console (rich renders the line first)."""
    if not console.quiet:
        console.print(text, highlight=False, **style)


class _Job:
    """The steps of one run, split so each reads on a screen: set up, optimize, write the end state."""

    def __init__(self, config: GepaJobConfig, envs: list[Environment], resolved: runs.ResolvedRun, console: Console,
                 verbose: bool, *, num_val: int, seed_cost: int):
        run_dir = resolved.run_dir
        self.config, self.envs, self.run_dir, self.resuming, self.console = (
            config,
            envs,
            run_dir,
            resolved.resuming,
            console,
        )
        self.started = time.perf_counter()
        self.state_dir = run_dir / outputs.STATE_SUBDIR
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.previous: dict[str, Any] = read_object(run_dir / runs.METADATA, GEPA_METADATA) if resolved.resuming else {}
        # the count comes from disk on resume; the limit from this config (a resumed run may raise it with -B)
        self.writer = BackgroundWriter()
        self.budget = RolloutBudget(config.max_calls, run_dir / runs.BUDGET, before_sync=self._started_durably,
                                    submit=self.writer.submit)
        # durable before the first rollout (what --resume needs: budget.json waits for it), written meanwhile
        self.start_write = self.writer.submit(write_json_atomic, run_dir / runs.METADATA, self._metadata("running"))
        self.budget_stopper = self._budget_stopper(num_val)
        self.budget.chunk = self.budget_stopper.iteration_cost  # reserved RESERVE_AHEAD at a time (budget.py)
        if seed_cost + self.budget.chunk <= self.budget.remaining:  # the first reservation, written meanwhile too
            self.budget.prefetch(seed_cost + self.budget.chunk, first=seed_cost)
        self.loop = LoopThread()
        self.logger = FileLogger(run_dir / runs.GEPA_LOG, console, verbose)
        self.owned_clients: list[ModelClient] = []
        self.tracker: _StateTracker | None = None
        self.saver: StateSaver | None = None
        """Saves gepa's state when we own that (a new run); a resumed run's gepa loads and saves it itself."""
        self.adapter: SystemPromptAdapter | None = None
        self.summary: dict[str, Any] = {}
        self.cost = self._reflection_cost()
        self.seed = seed_candidate(envs, config.components, [spec.id for spec in config.envs])
        if config.initial_prompt is not None:
            self.seed[COMPONENT] = config.initial_prompt

    def _started_durably(self) -> None:
        """Wait for the start's ``metadata.json`` (raising its write's error): called before the first budget
        record, so no rollout runs before the run can be resumed."""
        self.start_write.result()

    def _reflection_cost(self) -> ReflectionCost | None:
        """The teacher's spend (carried over from the earlier invocations), tracked when a cap is set."""
        config = self.config
        if config.max_reflection_cost is None:
            return None
        price = price_of(config.teacher, config.reflection_prices, free=is_embedded(config.teacher_spec()))
        return ReflectionCost(price, total_cost=float(self.previous.get("reflection_cost_usd") or 0.0))

    def optimize(
        self, train: list[Any], val: list[Any], clients: tuple[ModelClient, ModelClient] | None, show_progress: bool
    ) -> str:
        """Run the library's loop under our stoppers; returns why it stopped."""
        import gepa

        from gepa_cli.search import TrainLoader, gepa_search_kwargs

        config = self.config
        task, teacher = self._open(clients)
        self.mask = SecretMask("\n".join(self.seed[name] for name in self._prompt_components))
        saved_state = self._saved_state()
        checks = {name: check for name in self.seed if (check := check_text(name, self.seed)) is not None}
        proposer = Proposer(self._reflection(teacher), template=config.reflection_prompt_template, checks=checks,
                            hide=self.mask.hide)
        record = StopRecord()
        stoppers: list[Any] = [FatalStopper(proposer), *self._stoppers(record)]
        self.logger.log(
            f"{'resuming' if self.resuming else 'starting'}: envs={[s.id for s in config.envs]} model={config.model} "
            f"teacher={config.teacher} train={len(train)} val={len(val)} budget={config.max_calls} "
            f"used={self.budget.used}"
        )
        with ProgressReporter(self.console, self.budget, enabled=show_progress, log=self.logger.log) as progress:
            adapter = self._adapter(task, progress.on_rollouts, saved_state)
            self.adapter = adapter
            self.tracker = _StateTracker(self.run_dir, adapter, self.writer)
            if saved_state is not None:
                progress.restore(saved_state)
            else:  # gepa loads a saved state only from its run_dir, and then saves it there itself
                self.saver = StateSaver(self.state_dir, self.writer, adapter)
                stoppers.insert(0, self.saver)  # first: gepa stops asking at the first stopper that fires
            try:
                gepa.optimize(
                    seed_candidate=self._hidden_seed(),
                    trainset=TrainLoader(train),
                    valset=val,
                    adapter=adapter,
                    custom_candidate_proposer=proposer,
                    reflection_minibatch_size=config.minibatch_size,
                    perfect_score=config.perfect_score,  # type: ignore[arg-type]  # None: nothing counts as perfect
                    skip_perfect_score=config.perfect_score is not None,
                    stop_callbacks=stoppers,
                    logger=self.logger,
                    run_dir=None if self.saver is not None else str(self.state_dir),
                    callbacks=[progress, self.tracker],
                    track_best_outputs=False,
                    seed=config.seed,
                    raise_on_exception=True,
                    **gepa_search_kwargs(config, config.seed),
                    **tracking_kwargs(config, self.run_dir.name, tracked_config(config)),
                )
            except BudgetExceeded as exc:  # a safety net: the stopper should always stop first
                self.logger.log(f"evaluation refused: {exc}")
        if proposer.fatal is not None:
            raise proposer.fatal
        return record.reason or "stopped"

    def _stoppers(self, record: StopRecord) -> list[Named]:
        """Every stopper but the fatal one, each named in ``record`` when it ends the run."""
        config = self.config
        stoppers = []
        if config.stop_at_score is not None:
            stoppers.append(Named("stop_at_score", StopAtScoreStopper(config.stop_at_score), record))
        stoppers.append(Named("budget_exhausted", self.budget_stopper, record))
        watched = stop_files(self.run_dir)
        if self.resuming:
            clear_stop_files(watched, self.logger.log)
        return [*stoppers, *optional_stoppers(config, record, stop_files=watched, elapsed_s=self.earlier_s,
                                              cost=self.cost)]

    def _budget_stopper(self, num_val: int) -> BudgetStopper:
        from gepa_cli.search import val_cost

        config, proposals = self.config, self.config.proposals_per_iteration
        return BudgetStopper(self.budget, config.minibatch_size, val_cost(config, num_val), proposals=proposals,
                             accepts=1 if config.proposal_selection == "best" else proposals, merge=config.use_merge)

    @property
    def earlier_s(self) -> float:
        """The time the invocations before this one (of a resumed run) took."""
        return float(self.previous.get("duration_s") or 0.0)

    def _open(self, clients: tuple[ModelClient, ModelClient] | None) -> tuple[ModelClient, ModelClient]:
        """The task and teacher clients (opened here unless given), each preflighted once (those with nothing
        to check, in-process engines and scripted models, without a trip through the event loop)."""
        if clients is None:
            clients = open_clients(self.config)
            self.owned_clients = list(dict.fromkeys(clients))
        for client in dict.fromkeys(clients):
            if getattr(client, "preflight", None) is not None:
                self.loop.run(_preflight(client))
        return clients

    def _hidden_seed(self) -> dict[str, str]:
        """The seed candidate as gepa and the teacher see it: secret values of the system prompt masked
        (:class:`gepa_cli.secret_mask.SecretMask`); rollouts reveal them again."""
        return {**self.seed, **{name: self.mask.hide(self.seed[name]) for name in self._prompt_components}}

    @property
    def _prompt_components(self) -> list[str]:
        """The seed's system prompts: the shared one and any environment's own (``system_prompt:<env>``)."""
        return [name for name in self.seed if name == COMPONENT or name.startswith(ENV_PROMPT)]

    def _saved_state(self) -> Any:
        """The library's saved state of a resumed run (None for a new run), checked against the seed prompt."""
        saved_state = _try_load_state(self.state_dir) if self.resuming else None
        if saved_state is None and self.resuming and (self.state_dir / "gepa_state.bin").exists():
            # starting over would re-spend the seed's validation the plan counted as done, and lose the candidates
            raise UserError(f"--resume: {self.state_dir / 'gepa_state.bin'} is damaged, so the search cannot go on "
                            "from it; start a new run")
        if saved_state is not None and saved_state.program_candidates[0] != self._hidden_seed():
            raise UserError(
                f"--resume: the environment's system prompt or tool descriptions changed since {self.run_dir} "
                "started; start a new run"
            )
        return saved_state

    def _reflection(self, teacher: ModelClient) -> ReflectionLM:
        config = self.config
        embedded = is_embedded(config.teacher_spec())  # routed once: the rule reads the endpoints file
        return ReflectionLM(
            teacher,
            self.loop,
            SamplingArgs.from_dict(config.teacher_sampling_for(embedded)),
            attempts=config.reflection_attempts,
            on_request=self.budget.count_reflection_call,
            log=self.logger.log,
            open_block_first=embedded,
            on_usage=self.cost.add if self.cost is not None else None,
        )

    def _adapter(self, task: ModelClient, on_rollouts: Any, saved_state: Any) -> SystemPromptAdapter:
        config = self.config
        replay = None
        if saved_state is not None:  # the library re-scores the seed on resume; answer from the saved scores
            replay = (saved_state.program_candidates[0], dict(saved_state.prog_candidate_val_subscores[0]))
        return SystemPromptAdapter(
            self.envs,
            task,
            self.loop,
            self.budget,
            sampling=SamplingArgs.from_dict(config.sampling),
            bound=config.slots(),
            limits=config.limits(),
            state_columns=config.state_columns,
            on_rollouts=on_rollouts,
            replay_seed=replay,
            reveal=self.mask.reveal,
        )

    def finish(self, status: str, error: BaseException | None) -> None:
        """Close clients and the loop; write the candidate files and the final metadata, whatever happened.

        A write of the writer thread that failed fails the run (``metadata.json`` says so) and is raised
        here when the run had no error of its own."""
        for client in self.owned_clients:
            try:
                self.loop.run(client.aclose())
            except Exception:
                pass
        self.loop.close()
        self.budget.settle(sync=False)  # every rollout reserved in memory counts; nothing more will be spent
        # the files written below replace the start's metadata.json and those the tracker queued, which must not
        # land after them; gepa's last state snapshot, queued after those, is written meanwhile
        write_error = _caught(self.start_write.result)
        superseded = _caught(self.tracker.supersede) if self.tracker is not None else None
        write_error = write_error or superseded
        if self.saver is not None and self.tracker is not None and self.tracker.ended:
            write_error = write_error or _caught(lambda: self.saver.save_last(self.tracker.state))
        if self.tracker is None or self.tracker.state is None:  # the files come from gepa's saved state, if any
            write_error = write_error or _caught(self.writer.drain)
        files = {**self._candidate_files(), runs.METADATA: self._end_metadata(status, error, write_error)}
        budget_file = self.run_dir / runs.BUDGET  # none when the run failed before its first rollout
        outputs.write_files(self.run_dir, files, sync_too=[budget_file] if budget_file.exists() else [])
        drained = _caught(self.writer.close)
        if drained is not None and write_error is None:
            write_error = drained
            outputs.write_files(self.run_dir, {runs.METADATA: self._end_metadata(status, error, write_error)})
        if write_error is not None:
            self.logger.log(f"writing the run's files failed: {type(write_error).__name__}: {write_error}")
        budget = self.budget
        self.logger.log(f"finished: status={status if write_error is None else 'failed'} calls={budget.used}/"
                        f"{budget.max_calls} reflection_calls={budget.reflection_calls}")
        self.logger.close()
        if write_error is not None and error is None:
            raise write_error  # the run itself went well; its files did not (everything else is written)

    def _candidate_files(self) -> dict[str, bytes]:
        """The end state's candidate files (none before the seed's validation finished); sets ``summary``."""
        tracked = self.tracker.state if self.tracker is not None else None
        state = tracked if tracked is not None else _try_load_state(self.state_dir)
        if state is None:
            return {}
        discovered = self.tracker.adapter.discovered_at_calls if self.tracker is not None else {}
        best_idx, rows, files = outputs.candidate_files(state, discovered)
        self.summary = {
            "seed_val_score": rows[0]["score"],
            "best_score": rows[best_idx]["score"],
            "best_idx": best_idx,
            "num_candidates": len(rows),
            "initial_prompt_sha256": rows[0]["info"]["system_prompt_sha256"],
            "best_prompt_sha256": rows[best_idx]["info"]["system_prompt_sha256"],
        }
        return files

    def _end_metadata(self, status: str, error: BaseException | None, write_error: BaseException | None) -> bytes:
        """``metadata.json`` as the run ends; a run without an error of its own whose files failed to write failed."""
        if error is None and write_error is not None:
            status, error = "failed", write_error
        metadata = self._metadata(status)
        metadata.update(self.summary, duration_s=self.duration_s, **self._error_counts())
        if self.cost is not None:
            metadata["reflection_cost_usd"] = round(self.cost.total_cost, 6)
        if status not in ("running", "failed"):
            metadata["stopped_by"] = status
        metadata["completed_at"] = datetime.now().isoformat()
        if error is not None:
            metadata["error"] = f"{type(error).__name__}: {error}"
        return json_bytes(metadata, indent=2) + b"\n"

    def _error_counts(self) -> dict[str, Any]:
        """Rollouts that errored (scored 0 for gepa), this invocation's plus the killed runs' before it."""
        total = int(self.previous.get("num_rollout_errors") or 0)
        kinds = dict(self.previous.get("rollout_errors_by_kind") or {})
        if self.adapter is not None:
            total += self.adapter.errors
            for kind, count in self.adapter.errors_by_kind.items():
                kinds[kind] = int(kinds.get(kind, 0)) + count
        return {"num_rollout_errors": total, "rollout_errors_by_kind": kinds}

    @property
    def duration_s(self) -> float:
        """This invocation's time plus the killed runs' before it."""
        return round(time.perf_counter() - self.started + float(self.previous.get("duration_s") or 0.0), 3)

    def outcome(self, status: str) -> GepaOutcome:
        return GepaOutcome(
            run_dir=self.run_dir,
            status=status,
            seed_val_score=float(self.summary.get("seed_val_score", 0.0)),
            best_val_score=float(self.summary.get("best_score", 0.0)),
            best_idx=int(self.summary.get("best_idx", 0)),
            num_candidates=int(self.summary.get("num_candidates", 0)),
            total_metric_calls=self.budget.used,
            num_reflection_calls=self.budget.reflection_calls,
            duration_s=self.duration_s,
        )

    def _metadata(self, status: str) -> dict[str, Any]:
        return _metadata(self.config, self.run_dir, self.budget, status=status, previous=self.previous)


def _load_state(state_dir: Path) -> Any:
    from gepa.core.state import GEPAState

    return GEPAState.load(str(state_dir))


def _try_load_state(state_dir: Path) -> Any:
    """gepa's saved state, or None when there is none or it is damaged; one that names code is refused
    (:mod:`gepa_cli.saved_state`) before gepa unpickles it."""
    if not (state_dir / STATE_FILE).exists():
        return None
    if not check_state_file(state_dir / STATE_FILE):
        return None
    try:
        return _load_state(state_dir)
    except Exception:
        return None


def _metadata(
    config: GepaJobConfig, run_dir: Path, budget: RolloutBudget, *, status: str, previous: dict[str, Any]
) -> dict[str, Any]:
    """verifiers' GEPA metadata (``save_gepa_results``) with primekit's run facts beside it.

    verifiers' keys: ``schema_version``, ``eval_kind``, ``framework``, ``optimizer``, ``optimization_target``,
    ``env_id``, ``model``, ``reflection_model``, ``num_candidates``, ``best_idx``, ``best_score``,
    ``total_metric_calls``, ``initial_prompt_sha256``, ``best_prompt_sha256``, ``system_prompt_path``,
    ``results_path``, ``completed_at`` and ``config`` (their run summary). primekit's: ``status``, ``envs``,
    ``budget``, ``num_reflection_calls``, ``seed_val_score``, ``started_at``, ``duration_s``,
    ``verify_command``, ``job_config`` (what ``--resume`` continues). No API keys, only the variable's name.
    """
    data: dict[str, Any] = {
        "schema_version": outputs.SCHEMA_VERSION,
        "eval_kind": outputs.EVAL_KIND,
        "framework": "primekit",
        "optimizer": "gepa",
        "optimization_target": outputs.TARGET,
        "env_id": config.envs[0].id if len(config.envs) == 1 else config.env_label,
        "model": config.model,
        "reflection_model": config.teacher,
        "total_metric_calls": budget.used,
        "system_prompt_path": runs.SYSTEM_PROMPT,
        "results_path": runs.RESULTS,
        "config": _anchor_run_config(config),
        "status": status,
        "envs": [spec.model_dump() for spec in config.envs],
        "base_url": config.base_url,
        "api_key_var": config.api_key_var,
        "budget": config.max_calls,
        "num_reflection_calls": budget.reflection_calls,
        "seed": config.seed,
        "run_dir": str(run_dir),
        "started_at": previous.get("started_at") or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "job_config": config.model_dump(),
        "verify_command": verify_command(config, run_dir),
    }
    for key in ("seed_val_score", "best_score", "best_idx", "num_candidates", "initial_prompt_sha256",
                "best_prompt_sha256", "duration_s", "completed_at"):
        if key in previous:
            data[key] = previous[key]
    return data


def _anchor_run_config(config: GepaJobConfig) -> dict[str, Any]:
    """verifiers' ``config`` block of metadata.json (its key names: ``max_metric_calls``, ``env_args``...)."""
    envs = [{"env_id": s.id, "env_args": s.args, "extra_env_kwargs": s.extra_env_kwargs} for s in config.envs]
    return {
        "env_id": config.envs[0].id if len(config.envs) == 1 else config.env_label,
        "envs": envs,
        "env_args": envs[0]["env_args"] if len(envs) == 1 else {},
        "model": config.model,
        "reflection_model": config.teacher,
        "num_train": config.num_train,
        "num_val": config.num_val,
        "max_metric_calls": config.max_calls,
        "minibatch_size": config.minibatch_size,
        "perfect_score": config.perfect_score,
        "state_columns": config.state_columns,
        "seed": config.seed,
    }


def tracked_config(config: GepaJobConfig) -> dict[str, Any]:
    """What the tracker is told about the run: verifiers' run summary and the search settings (no URL, no key name)."""
    from gepa_cli.search_options import search_field_names

    return {**_anchor_run_config(config), **{name: getattr(config, name) for name in search_field_names()}}


def verify_command(config: GepaJobConfig, run_dir: Path) -> str:
    """The exact ``prime eval run`` that checks the optimized prompt on the first environment (with the run's
    ``--env-file`` files; a secret value in its env args shown redacted)."""
    parts = ["prime", "eval", "run", config.envs[0].id, "-m", config.model]
    if config.envs[0].args:
        parts += ["-a", json.dumps(config.envs[0].args)]
    if config.envs[0].extra_env_kwargs:
        parts += ["-x", json.dumps(config.envs[0].extra_env_kwargs)]
    if config.env_dir_path != "environments":
        parts += ["--env-dir-path", config.env_dir_path]
    if config.base_url:
        parts += ["-b", config.base_url]
    if config.api_key_var:
        parts += ["-k", config.api_key_var]
    if config.endpoints_path:
        parts += ["-e", config.endpoints_path]
    if config.sampling:
        parts += ["-S", json.dumps(config.sampling)]
    for path in config.env_file:
        parts += ["--env-file", path]
    parts += ["--system-prompt-file", str(run_dir / runs.SYSTEM_PROMPT)]
    if TOOLS in config.components:
        parts += ["--tools-file", str(run_dir / FILES[TOOLS])]
    return redact(shlex.join(parts))  # terminal output: env args may hold a secret of the env files
