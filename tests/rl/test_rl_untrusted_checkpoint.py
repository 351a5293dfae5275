"""An RL checkpoint's ``rng.pt`` and ``optimizer.pt`` are read as data only (``torch.load(weights_only=True)``).

Real files: a checkpoint saved by :func:`save_checkpoint` from a real optimizer, then a crafted or truncated file in
its place. A crafted ``rng.pt`` whose pickle would call ``os.system`` (to create a marker file) is refused without
running; a truncated file is one ``error:`` line naming the file, as a damaged ``state.json`` already is.
"""

from __future__ import annotations

import os
import pickle
import random
from pathlib import Path

import pytest
import torch

from evalkit.core.errors import UserError
from rl_backend.checkpoints import load_checkpoint, save_checkpoint


class _Policy:
    """What the checkpoint functions use of a policy: its trainable part (a real tensor file) and a real optimizer."""

    def __init__(self) -> None:
        self.layer = torch.nn.Linear(4, 2)
        self.optimizer = torch.optim.AdamW(self.layer.parameters(), lr=1e-3)
        self.layer(torch.ones(1, 4)).sum().backward()
        self.optimizer.step()

    def save_trainable(self, folder: Path) -> None:
        folder.mkdir()
        torch.save(self.layer.state_dict(), folder / "weights.pt")

    def load_trainable(self, folder: Path) -> None:
        self.layer.load_state_dict(torch.load(folder / "weights.pt", weights_only=True))


class _Marker:
    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


@pytest.fixture
def run_dir(tmp_path) -> Path:
    save_checkpoint(tmp_path, 1, _Policy(), {"cursor": 3})
    return tmp_path


def test_a_checkpoint_the_trainer_wrote_still_loads(run_dir):
    saved, resumed = _Policy(), _Policy()
    torch.manual_seed(5)
    random.seed(5)
    expected = (torch.rand(1).item(), random.random())
    torch.manual_seed(5)
    random.seed(5)
    save_checkpoint(run_dir, 2, saved, {"cursor": 7})
    torch.manual_seed(0)
    random.seed(0)
    assert load_checkpoint(run_dir, 2, resumed)["cursor"] == 7
    assert torch.equal(resumed.layer.weight, saved.layer.weight)
    assert (torch.rand(1).item(), random.random()) == expected


@pytest.mark.parametrize("name", ["rng.pt", "optimizer.pt"])
def test_a_crafted_file_runs_nothing(run_dir, tmp_path, name):
    marker = tmp_path / "PWNED"
    payload = {"torch": _Marker(marker), "python": None} if name == "rng.pt" else {"state": _Marker(marker)}
    path = run_dir / "checkpoints" / "step_1" / name
    torch.save(payload, path)  # torch's own format, as a checkpoint is
    with pytest.raises(UserError, match=f"{name}: it names code"):
        load_checkpoint(run_dir, 1, _Policy())
    path.write_bytes(pickle.dumps(payload))  # and a bare pickle (torch's legacy format)
    with pytest.raises(UserError, match=f"{name}: "):
        load_checkpoint(run_dir, 1, _Policy())
    assert not marker.exists()


@pytest.mark.parametrize("name", ["rng.pt", "optimizer.pt"])
def test_a_truncated_file_is_one_line(run_dir, name):
    path = run_dir / "checkpoints" / "step_1" / name
    path.write_bytes(path.read_bytes()[:300])
    with pytest.raises(UserError) as caught:
        load_checkpoint(run_dir, 1, _Policy())
    message = str(caught.value)
    assert f"is damaged ({name}: truncated or not a torch file)" in message and "--resume STEP" in message
    assert "\n" not in message and "weights_only" not in message


def test_a_fifo_in_place_of_a_file_is_refused_without_blocking(run_dir):
    path = run_dir / "checkpoints" / "step_1" / "rng.pt"
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(UserError, match="rng.pt: it is a FIFO, not a regular file"):
        load_checkpoint(run_dir, 1, _Policy())
