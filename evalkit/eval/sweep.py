"""A checkpoint sweep: one eval per weight export of an RL run, plus its starting model, resumable.

``prime eval run ENV -m outputs/rl/<run>/weights --steps all|10,20,...`` evaluates the merged model
in each ``weights/step_N`` (what ``trainer.ckpt`` kept) with the same eval settings, and the model
the run started from (its ``config.resolved.toml``) as step 0, the baseline. Every step is an
ordinary eval run dir, ``<sweep>/step_N/`` (``<sweep>/step_0/`` the baseline), so a killed sweep
continues where it stopped when the command is run again: a complete step has nothing left to run,
a cut one runs only its missing rollouts. ``<sweep>/sweep.json`` says which run and steps the
folder holds; ``prime eval view --html <sweep>`` plots reward by step with the baseline.

Each step's model is loaded once before its eval (:func:`load_problem`; the eval then uses that
shared engine): a step that cannot load (an export that never finished, a damaged file) is skipped
with one warning line and the sweep goes on, instead of stopping there or erroring every rollout.

Where: ``<rl run>/sweeps/<env>/`` (next to the weights it evaluates), or with ``-o DIR``
``DIR/sweeps/<rl run name>/<env>/``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.core import runs
from evalkit.core.errors import UserError
from evalkit.core.fileio import write_json_atomic
from evalkit.core.readback import read_object
from evalkit.core.runs import RESOLVED_CONFIG, SWEEP_FILE, SWEEPS_DIR, WEIGHTS_DIR, env_slug, step_numbers
from evalkit.core.tomlio import read_run_toml


@dataclass
class Sweep:
    """What a sweep evaluates: ``steps`` of ``weights_dir`` (0: ``base_model``) into ``folder``."""

    weights_dir: Path
    rl_run: Path | None
    base_model: str | None
    steps: list[int]
    folder: Path

    def model_of(self, step: int) -> str:
        """Step N's weight export; step 0 is the starting model (its export when the run made one)."""
        export = runs.step_dir(self.weights_dir, step)
        return str(self.base_model) if step == 0 and not export.is_dir() else str(export)


def plan_sweep(model: str | None, steps: str, env_id: str, output_dir: str | None) -> Sweep:
    """The sweep ``-m MODEL --steps STEPS`` asks for; a UserError names what is wrong (a step not kept, ...)."""
    if not model:
        raise UserError("--steps evaluates an RL run's checkpoints: pass -m outputs/rl/<run>/weights")
    weights = Path(model).expanduser()
    if (weights / WEIGHTS_DIR).is_dir():  # the run dir itself
        weights = weights / WEIGHTS_DIR
    available = step_numbers(weights)
    if not available:
        raise UserError(f"--steps: {model} holds no step_N weight exports; pass -m outputs/rl/<run>/weights "
                        "(a run saves them with ckpt.save_weights, every ckpt.interval steps)")
    wanted = _parse_steps(steps, available)
    rl_run = weights.parent if (weights.parent / RESOLVED_CONFIG).is_file() else None
    base = _base_model(rl_run) if rl_run is not None else None
    if base is None and 0 in wanted and 0 not in available:
        raise UserError(
            f"--steps 0 is the run's starting model, but {weights.parent} has no config.resolved.toml naming it"
        )
    steps_all = sorted(set(wanted) | ({0} if base is not None or 0 in available else set()))
    if output_dir is not None:
        folder = Path(output_dir) / SWEEPS_DIR / weights.resolve().parent.name / env_slug(env_id)
    else:
        folder = weights.parent / SWEEPS_DIR / env_slug(env_id)
    return Sweep(weights_dir=weights.resolve(), rl_run=rl_run.resolve() if rl_run else None, base_model=base,
                 steps=steps_all, folder=folder)


def _parse_steps(text: str, available: list[int]) -> list[int]:
    if text.strip().lower() == "all":
        return available
    try:
        wanted = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise UserError(f"--steps '{text}': give 'all' or step numbers like 10,20,30") from None
    missing = [step for step in wanted if step not in available and step != 0]
    if not wanted or missing:
        named = ", ".join(map(str, missing)) or repr(text)
        raise UserError(f"--steps: no weight export for step(s) {named}; "
                        f"this run kept {', '.join(map(str, available))} (ckpt.keep_last prunes older ones)")
    return wanted


def _base_model(rl_run: Path) -> str | None:
    config = read_run_toml(rl_run / RESOLVED_CONFIG) or {}
    model = config.get("model")
    return model if isinstance(model, str) and model else None


def record(sweep: Sweep, config: Any) -> None:
    """``sweep.json``: the run, the steps (those of earlier invocations kept) and the eval settings."""
    path = sweep.folder / SWEEP_FILE
    previous = read_sweep_file(sweep.folder)
    steps = sorted(set(sweep.steps) | {s for s in previous.get("steps", []) if isinstance(s, int)})
    sweep.folder.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, {
        "kind": "sweep", "env_id": config.env_id, "env_args": config.env_args, "rl_run": str(sweep.rl_run or ""),
        "weights_dir": str(sweep.weights_dir), "base_model": sweep.base_model, "steps": steps,
        "num_examples": config.num_examples, "rollouts_per_example": config.rollouts_per_example,
    })


def read_sweep_file(folder: Path) -> dict[str, Any]:
    """A sweep folder's ``sweep.json`` ({} when missing or unreadable)."""
    return read_object(Path(folder) / SWEEP_FILE)


def load_problem(config: Any) -> str | None:
    """Load ``config``'s model now, once (an embedded model becomes the process's shared engine, which
    the step's eval then uses); why it cannot load, in one line, or ``None``. A model behind an HTTP
    endpoint is not contacted here."""
    from evalkit.clients.factory import make_client

    try:
        client = make_client(config.client_spec())
        from evalkit.clients.local import LocalClient

        if isinstance(client, LocalClient):
            client.engine  # noqa: B018 -- the property loads the shared engine
    except Exception as exc:  # any failure to load is this step's, never the sweep's
        text = " ".join(str(exc).split()) or type(exc).__name__
        return (text if isinstance(exc, UserError) else f"{type(exc).__name__}: {text}")[:300]
    return None


def step_configs(config: Any, sweep: Sweep) -> list[tuple[int, Any]]:
    """One eval config per step: the same settings, the step's model, the step's run dir."""
    return [(step, config.model_copy(update={"model": sweep.model_of(step), "endpoint_id": None, "resume": None,
                                             "run_dir": str(runs.step_dir(sweep.folder, step))}))
            for step in sweep.steps]
