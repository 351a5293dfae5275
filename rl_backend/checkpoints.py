"""Checkpoints (to resume) and weight exports (to evaluate or serve), each written atomically.

``checkpoints/step_N/``: ``trainable/`` (the LoRA adapter in peft format, or the full model),
``optimizer.pt``, ``rng.pt`` and ``state.json`` (step, data cursor). ``weights/step_N/``: the merged
full model plus tokenizer in Hugging Face format, loadable by ``prime eval run -m`` and ``prime
serve --model``. A folder is built under a temporary name and renamed when complete, so a killed run
never leaves a half-written ``step_N`` that ``--resume`` would pick. The temporary folder is private
(``mkdtemp`` makes it 0700); before the rename everything in it gets the permissions any new file
would get (0644 / 0755 under the usual umask), so others can read a published step.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

from evalkit.core.errors import UserError
from evalkit.core.readback import RL_CHECKPOINT_STATE, parse_line
from evalkit.core.runs import CHECKPOINTS_DIR, WEIGHTS_DIR, step_dir, step_name, step_numbers
from evalkit.core.untrusted import json_bytes


def steps_in(folder: Path) -> list[int]:
    """The steps of the ``step_N`` folders in ``folder`` (checkpoints or weight exports)."""
    return step_numbers(folder)


def _atomic_dir(parent: Path, name: str) -> tuple[Path, Path]:
    """A fresh temporary folder for ``name`` (a killed earlier attempt's is removed: the run is locked)."""
    parent.mkdir(parents=True, exist_ok=True)
    for stale in parent.glob(f".{name}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f".{name}.tmp-", dir=parent)), parent / name


def _umask() -> int:
    """The process umask, read without changing it (Linux); 0o022 where it cannot be read."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def _normal_permissions(folder: Path) -> None:
    """Folders 0777 and files 0666, less the umask: what ``mkdir`` / ``open`` would have given."""
    mask = _umask()
    os.chmod(folder, 0o777 & ~mask)
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o777 & ~mask)
        for name in files:
            os.chmod(os.path.join(root, name), 0o666 & ~mask)


def _publish(tmp: Path, final: Path) -> None:
    _normal_permissions(tmp)
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)


def save_checkpoint(run_dir: Path, step: int, policy: Any, state: dict[str, Any]) -> Path:
    import torch

    tmp, final = _atomic_dir(run_dir / CHECKPOINTS_DIR, step_name(step))
    try:
        policy.save_trainable(tmp / "trainable")
        torch.save(policy.optimizer.state_dict(), tmp / "optimizer.pt")
        torch.save({"torch": torch.get_rng_state(), "python": random.getstate()}, tmp / "rng.pt")
        (tmp / "state.json").write_bytes(json_bytes({"step": step, **state}, indent=2))
        _publish(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def load_checkpoint(run_dir: Path, step: int, policy: Any) -> dict[str, Any]:
    import torch

    folder = step_dir(run_dir / CHECKPOINTS_DIR, step)
    available = ", ".join(map(str, steps_in(run_dir / CHECKPOINTS_DIR))) or "none"
    if not (folder / "state.json").is_file():
        raise UserError(f"no checkpoint for step {step} in {run_dir / 'checkpoints'} (available: {available})")
    state, why = parse_line((folder / "state.json").read_bytes(), RL_CHECKPOINT_STATE)
    if state is None:
        raise UserError(f"checkpoint {folder} is damaged (state.json: {why}); resume from another step with "
                        f"--resume STEP (available: {available})")
    policy.load_trainable(folder / "trainable")
    policy.optimizer.load_state_dict(torch.load(folder / "optimizer.pt", weights_only=True))
    rng = torch.load(folder / "rng.pt", weights_only=False)
    torch.set_rng_state(rng["torch"])
    random.setstate(rng["python"])
    return state


def export_weights(run_dir: Path, step: int, model: Any, tokenizer: Any) -> Path:
    """The merged full model in HF format (what `prime eval run -m` and `prime serve` load)."""
    tmp, final = _atomic_dir(run_dir / WEIGHTS_DIR, step_name(step))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        _publish(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def prune(folder: Path, keep_last: int | None) -> list[int]:
    """Delete all but the newest ``keep_last`` step folders; returns the steps removed."""
    if keep_last is None:
        return []
    steps = steps_in(folder)
    removed = steps[:-keep_last] if len(steps) > keep_last else []
    for step in removed:
        shutil.rmtree(step_dir(folder, step), ignore_errors=True)
    return removed
