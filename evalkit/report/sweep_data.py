"""A checkpoint sweep folder as the report reads it (:mod:`evalkit.eval.sweep` writes it).

``sweep.json`` names the RL run, the environment and the steps; ``step_N/`` are eval run dirs
(``step_0`` the starting model). A step whose eval has not finished (or failed) shows as missing
rather than breaking the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.core.readback import EVAL_METADATA, read_object
from evalkit.core.runs import METADATA, SWEEP_FILE, step_dir, step_numbers
from evalkit.core.untrusted import is_finite_number


@dataclass
class SweepPoint:
    """One step's eval: mean reward (± std over rollouts), pass@1, errors, its run dir."""

    step: int
    model: str
    reward: float | None
    std: float | None
    pass_at_1: float | None
    rollouts: int
    errors: int
    status: str
    run_dir: Path


@dataclass
class SweepRun:
    path: Path
    label: str
    info: dict[str, Any]
    points: list[SweepPoint]

    @property
    def baseline(self) -> SweepPoint | None:
        """Step 0: the model the RL run started from."""
        return next((p for p in self.points if p.step == 0 and p.reward is not None), None)

    @property
    def trained(self) -> list[SweepPoint]:
        return [p for p in self.points if p.step > 0 and p.reward is not None]


def load_sweep(path: Path, label: str | None = None) -> SweepRun:
    info = read_object(path / SWEEP_FILE)
    steps = sorted(set(step_numbers(path)) | {s for s in info.get("steps", []) if isinstance(s, int)})
    points = [_point(path, step) for step in steps]
    return SweepRun(path=path, label=label or _default_label(path, info), info=info, points=points)


def _point(path: Path, step: int) -> SweepPoint:
    run_dir = step_dir(path, step)
    meta = read_object(run_dir / METADATA, EVAL_METADATA)
    pass_at_k = meta.get("pass_at_k") if isinstance(meta.get("pass_at_k"), dict) else {}
    return SweepPoint(
        step=step,
        model=str(meta.get("model") or ""),
        reward=_number(meta.get("avg_reward")),
        std=_number(meta.get("std_reward")),
        pass_at_1=_number(pass_at_k.get("1")),
        rollouts=int(meta.get("num_rollouts") or 0) if isinstance(meta.get("num_rollouts"), int) else 0,
        errors=int(meta.get("num_errors") or 0) if isinstance(meta.get("num_errors"), int) else 0,
        status=str(meta.get("status") or "not run"),
        run_dir=run_dir,
    )


def _number(value: Any) -> float | None:
    return float(value) if is_finite_number(value) else None


def _default_label(path: Path, info: dict[str, Any]) -> str:
    from evalkit.core.runs import env_slug

    run = Path(str(info.get("rl_run") or "")).name or path.parent.name
    return f"{run} · {env_slug(str(info.get('env_id') or path.name))}"


def header(run: SweepRun) -> list[tuple[str, str]]:
    info = run.info
    from evalkit.core.runs import is_sft_run

    trained = str(info.get("rl_run") or "")
    pairs = [("environment", str(info.get("env_id") or "?")),
             ("SFT run" if trained and is_sft_run(Path(trained)) else "RL run", trained or "?"),
             ("starting model (step 0)", str(info.get("base_model") or "not evaluated")),
             ("examples x rollouts", f"{info.get('num_examples', '?')} x {info.get('rollouts_per_example', '?')}"),
             ("steps", ", ".join(str(p.step) for p in run.points))]
    best = max(run.trained, key=lambda p: p.reward or 0.0, default=None)
    if best is not None:
        pairs.append(("best step", f"{best.step} (reward {best.reward:.3f})"))
    return pairs
