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
from evalkit.core.fileio import read_regular
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
    folder = step_dir(run_dir / CHECKPOINTS_DIR, step)
    available = ", ".join(map(str, steps_in(run_dir / CHECKPOINTS_DIR))) or "none"
    if not (folder / "state.json").is_file():
        raise UserError(f"no checkpoint for step {step} in {run_dir / 'checkpoints'} (available: {available})")
    state, why = parse_line((folder / "state.json").read_bytes(), RL_CHECKPOINT_STATE)
    if state is None:
        raise UserError(f"checkpoint {folder} is damaged (state.json: {why}); resume from another step with "
                        f"--resume STEP (available: {available})")
    def damaged(part: str, exc: BaseException) -> UserError:
        why = _why_unreadable(exc)
        return UserError(f"checkpoint {folder} is damaged ({part}: {why}); resume from another step with --resume STEP "
                         f"(available: {available})")

    steps = (("trainable", lambda: policy.load_trainable(folder / "trainable")),
             ("optimizer.pt", lambda: policy.optimizer.load_state_dict(_load_tensors(folder / "optimizer.pt"))),
             ("rng.pt", lambda: _restore_rng(_load_tensors(folder / "rng.pt"))))
    for part, load in steps:
        try:
            load()
        except UserError:
            raise
        except Exception as exc:  # a truncated or crafted file: whatever torch, peft or the optimizer raise
            raise damaged(part, exc) from exc
    return state


def _load_tensors(path: Path) -> Any:
    """A checkpoint file read as data only: ``weights_only=True`` admits tensors and plain containers, never a
    class or function a crafted pickle names (a run dir comes from anywhere: docs/reliability.md)."""
    import io
    import warnings

    import torch

    data = io.BytesIO(read_regular(path))  # a FIFO in its place would block torch's open
    with warnings.catch_warnings():  # torch's note on a foreign pickle protocol: the refusal says enough
        warnings.simplefilter("ignore", UserWarning)
        return torch.load(data, weights_only=True, map_location="cpu")


def _why_unreadable(exc: BaseException) -> str:
    """A short reason for a checkpoint file that did not load (torch's own advice would be to load it with code
    allowed, which is exactly what must not happen)."""
    import pickle

    if isinstance(exc, pickle.UnpicklingError) and "weights only" in str(exc).lower():
        return "it names code (a class or function), not only tensors and plain data; primekit does not load it"
    text = " ".join(str(exc).split())
    if "central directory" in text or isinstance(exc, EOFError):
        return "truncated or not a torch file"
    return (text[:160] + ("..." if len(text) > 160 else "")) or type(exc).__name__


def _restore_rng(rng: Any) -> None:
    import torch

    if not isinstance(rng, dict) or not isinstance(rng.get("torch"), torch.Tensor):
        raise ValueError("not the {torch, python} random states a checkpoint holds")
    torch.set_rng_state(rng["torch"])
    random.setstate(rng["python"])


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
