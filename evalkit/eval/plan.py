"""The first step of an eval: which examples, which run dir, and which rollouts are still missing.

Planning touches no model and writes nothing. The dataset selection is deterministic
(``split``, ``num_examples``, ``seed``, ``shuffle``), so example ids mean the same thing across
resumes; :func:`identity` is what a run dir must have been run with to be resumed by a config.
Run dirs are named and found through :mod:`evalkit.core.runs`.

Example ids are each row's index in its split, or the task's own id where verifiers writes that instead
(:meth:`~evalkit.envs.base.Environment.task_ids`). A run dir keeps the ids it was started with: one written
before primekit used task ids (its rows keyed by index) resumes by index, so no run mixes the two.

What is missing: every ``(example_id, rollout_idx)`` without a row, plus, with ``retry_errors``
(the default), every row that errored without a score (``plan.retry``; error kinds ``model``,
``environment``, ``timeout``). Rows whose reward function raised are scored and stay.

``resume="latest"`` (a bare ``-R``) continues the newest matching run that is not ``complete``
(``incomplete``, or ``complete_with_errors`` with rows to retry). When the newest matching run is
complete there is nothing to do: that run dir is planned with nothing missing and a note says so;
a new run starts (with a note) only when no run with these settings exists.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from evalkit.core import runs
from evalkit.core.errors import UserError, is_scored
from evalkit.core.fileio import check_output_dir
from evalkit.core.types import ExampleId, SamplingArgs
from evalkit.envs.base import Environment
from evalkit.eval.config import EvalConfig
from evalkit.eval.results import read_rows

MATCH_KEYS = ("env_id", "env_args", "model", "num_examples_requested", "rollouts_per_example", "sampling_args",
              "system_prompt_sha256", "seed", "shuffle", "split")
"""Keys that must agree for a run dir to be resumed with a given config."""
MATCH_DEFAULTS = {"split": "eval"}
"""Values of keys that older run dirs did not record."""


@dataclass
class EvalPlan:
    """What an eval will do. ``existing``/``missing``/``previous`` describe the run dir as last read."""

    config: EvalConfig
    env: Environment
    examples: dict[ExampleId, dict[str, Any]]
    """The selected rows by example id (each row's own index in its split, or the task's own id; see
    ``Environment.example_ids`` and ``Environment.task_ids``)."""
    sampling: SamplingArgs
    identity: dict[str, Any]
    run_dir: Path
    notes: list[str] = field(default_factory=list)
    existing: list[dict[str, Any]] = field(default_factory=list)
    missing: dict[ExampleId, list[int]] = field(default_factory=dict)
    previous: dict[str, Any] = field(default_factory=dict)
    retry: list[dict[str, Any]] = field(default_factory=list)
    """Rows on disk that errored without a score and run again (``retry_errors``); part of ``missing``."""

    @property
    def total(self) -> int:
        return len(self.examples) * self.config.rollouts_per_example

    @property
    def todo(self) -> int:
        return sum(len(indices) for indices in self.missing.values())

    def refresh(self) -> None:
        """Re-read the run dir: rows already written (a cut last line repaired) and what is missing."""
        rows = read_rows(self.run_dir, repair=True)
        self.retry = [r for r in rows if not is_scored(r)] if self.config.retry_errors else []
        retry_ids = {id(r) for r in self.retry}
        self.existing = [r for r in rows if id(r) not in retry_ids]
        done: dict[ExampleId, set[int]] = {}
        for row in self.existing:
            done.setdefault(row["example_id"], set()).add(int(row["rollout_idx"]))
        wanted = range(self.config.rollouts_per_example)
        self.missing = {
            eid: [idx for idx in wanted if idx not in done.get(eid, set())]
            for eid in self.examples
        }
        self.missing = {eid: idxs for eid, idxs in self.missing.items() if idxs}
        self.previous = runs.read_metadata(self.run_dir) or {}


def plan_eval(config: EvalConfig, env: Environment | None = None) -> EvalPlan:
    """Load the environment (unless given), select examples, pick the run dir, read what it holds."""
    if env is None:
        from evalkit.loading.kwargs import apply_extra_env_kwargs
        from evalkit.loading.resolve import load_environment

        env = load_environment(config.env_id, config.env_args, environments_dir=config.env_dir_path)
        apply_extra_env_kwargs(env, config.extra_env_kwargs, config.env_id)
    if config.tool_descriptions is not None:
        from evalkit.envs.tool_descriptions import apply_descriptions

        apply_descriptions(env, config.tool_descriptions, "--tools-file")
    if env.pass_threshold is not None and "pass_threshold" not in config.model_fields_set:
        config = config.model_copy(update={"pass_threshold": env.pass_threshold})  # verifiers' own, unless set
    if config.independent_scoring:
        from evalkit.loading.kwargs import require_independent_scoring

        require_independent_scoring(env, config.env_id)
    examples = select_examples(config, env)
    if not examples:
        raise UserError(f"environment '{config.env_id}' has no examples to evaluate")
    sampling = SamplingArgs.from_dict(config.sampling)
    ident = identity(config, sampling)
    notes: list[str] = []
    if config.num_examples > len(examples):
        notes.append(f"-n {config.num_examples}: the {config.split} split of '{config.env_id}' has only "
                     f"{len(examples)} examples; evaluating all {len(examples)}")
    check_output_dir(config.output_root)
    run_dir = pick_run_dir(config, ident, notes)
    check_output_dir(run_dir, "run dir")
    plan = EvalPlan(config, env, examples, sampling, ident, run_dir, notes)
    plan.refresh()
    _keep_index_ids(plan)
    if plan.retry:
        notes.append(f"running again {len(plan.retry)} rollouts that errored without a score "
                     "(--no-retry-errors keeps them)")
    return plan


def select_examples(config: EvalConfig, env: Environment, by_index: bool = False) -> dict[ExampleId, dict[str, Any]]:
    """The rows this config evaluates, in the order selected, by example id (the task's own id where the
    environment has one, else the row's own index; ``by_index``: always the index)."""
    take = env.get_dataset if config.split == "train" else env.get_eval_dataset
    rows = take(n=config.num_examples, seed=config.seed, shuffle=config.shuffle)
    ids = env.example_ids(rows, config.seed, config.shuffle, config.split)
    return dict(zip(ids if by_index else env.task_ids(rows, ids), rows))


def _keep_index_ids(plan: EvalPlan) -> None:
    """A run dir whose rows are keyed by index (written before primekit used task ids) goes on by index."""
    held = {row["example_id"] for row in plan.existing + plan.retry}
    if not held or held & set(plan.examples) or not all(type(eid) is int for eid in held):
        return
    by_index = select_examples(plan.config, plan.env, by_index=True)
    if held <= set(by_index):
        plan.examples = by_index
        plan.refresh()
        plan.notes.append(f"{plan.run_dir.name} keys its rows by index (written before primekit used the tasks' own "
                          "ids); resuming it by index")


def identity(config: EvalConfig, sampling: SamplingArgs) -> dict[str, Any]:
    """What must match for a run dir to be resumed by this config (recorded in metadata.json)."""
    return {
        "env_id": config.env_id,
        "env_args": config.env_args,
        "model": config.model_label,
        "num_examples_requested": config.num_examples,
        "rollouts_per_example": config.rollouts_per_example,
        "sampling_args": sampling.to_dict(),
        "system_prompt_sha256": config.system_prompt_sha256(),
        "seed": config.seed,
        "shuffle": config.shuffle,
        "split": config.split,
    }


def runs_parent(config: EvalConfig) -> Path:
    """``<output root>/evals/<env>--<model>`` (the root: :attr:`EvalConfig.output_root`)."""
    return runs.runs_parent(config.output_root, runs.EVAL_JOB, config.env_id, config.model_label)


def pick_run_dir(config: EvalConfig, ident: dict[str, Any], notes: list[str]) -> Path:
    """A new run dir, the newest resumable one (``resume="latest"``), or the one named (checked);
    ``notes`` gets what a person should be told."""
    resolved = runs.resolve_run(run_dirs(config, ident), runs.ResumeRequest.parse(config.resume))
    notes.extend(resolved.notes)
    return resolved.run_dir


def run_dirs(config: EvalConfig, ident: dict[str, Any]) -> runs.RunDirs:
    """Eval's run-dir rules: a bare ``-R`` continues the newest run recorded with the same settings
    (``ident``) that is not ``complete``; a run dir named by ``-R`` or ``run_dir`` must match them."""
    meta = cache(runs.read_metadata)

    def check(run_dir: Path) -> None:
        saved = meta(run_dir)
        if saved is None:
            raise UserError(f"cannot resume {run_dir}: no readable metadata.json there (is it a run dir?)")
        runs.require_same(run_dir, saved, ident, MATCH_KEYS, defaults=MATCH_DEFAULTS,
                          hint="pass the same flags, or drop --resume to start a new run")

    return runs.RunDirs(
        parent=runs_parent(config),
        fixed=Path(config.run_dir) if config.run_dir is not None else None,
        holds_run=lambda run_dir: meta(run_dir) is not None,
        check=check,
        fits=lambda run_dir: (
            bool(meta(run_dir)) and not runs.mismatches(meta(run_dir), ident, MATCH_KEYS, MATCH_DEFAULTS)
        ),
        done=lambda run_dir: (meta(run_dir) or {}).get("status") == "complete",
        flag="-R",
    )
