"""Run dirs, ``results.jsonl`` and ``metadata.json``: written so that a killed run can be resumed.

Layout: ``<output_dir>/evals/<env-id>--<model, '/' -> '--'>/<run-id>/``.

- ``results.jsonl`` is append-only; each finished group is written with a single ``write`` and a
  flush, so ``kill -9`` loses at most the groups in flight. A kill can still cut the last line in
  half; :func:`read_rows` drops such a tail (and truncates it away before appending again) and
  skips duplicate ``(example_id, rollout_idx)`` rows, keeping the first.
- ``metadata.json`` is rewritten atomically (temp file + rename): ``status`` is ``incomplete``
  until the run ends, which is how ``--resume`` finds runs to continue.
"""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path
from typing import Any, TextIO

RESULTS = "results.jsonl"
METADATA = "metadata.json"
# Keys that must agree for a run dir to be resumed with a given config.
MATCH_KEYS = ("env_id", "env_args", "model", "num_examples_requested", "rollouts_per_example", "sampling_args",
              "system_prompt_sha256", "seed", "shuffle")


def model_slug(model: str) -> str:
    return model.strip("/").replace("/", "--")


def env_slug(env_id: str) -> str:
    return Path(env_id).name if env_id.startswith((".", "/", "~")) else env_id.split("/")[-1]


def runs_parent(output_dir: str | Path, env_id: str, model: str) -> Path:
    return Path(output_dir) / "evals" / f"{env_slug(env_id)}--{model_slug(model)}"


def new_run_dir(output_dir: str | Path, env_id: str, model: str, *, create: bool = True) -> Path:
    """A fresh run dir named by UTC time plus a short random suffix (sortable, never colliding).

    ``create=False`` only names it, so a run that fails before its first request leaves nothing.
    """
    run_id = time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)
    path = runs_parent(output_dir, env_id, model) / run_id
    if create:
        path.mkdir(parents=True, exist_ok=False)
    return path


def read_metadata(run_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((run_dir / METADATA).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read_rows(run_dir: Path, *, repair: bool = False) -> list[dict[str, Any]]:
    """All complete rows, first of each ``(example_id, rollout_idx)``; ``repair`` truncates a cut tail."""
    path = run_dir / RESULTS
    if not path.is_file():
        return []
    data = path.read_bytes()
    good_end = data.rfind(b"\n") + 1  # everything after the last newline is a half-written row
    rows: list[dict[str, Any]] = []
    seen: set[tuple[int, int]] = set()
    for line in data[:good_end].splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            key = (int(row["example_id"]), int(row["rollout_idx"]))
        except (ValueError, KeyError, TypeError):
            continue  # a line damaged by a crash mid-write; its rollout will be re-run
        if key in seen:
            continue
        seen.add(key)
        rows.append(row)
    if repair and good_end < len(data):
        with path.open("r+b") as handle:
            handle.truncate(good_end)
    return rows


class ResultsWriter:
    """Appends groups of rows to results.jsonl: one write and one flush per group."""

    def __init__(self, run_dir: Path):
        self.path = run_dir / RESULTS
        self._handle: TextIO = self.path.open("a", encoding="utf-8")

    def write_group(self, rows: list[dict[str, Any]]) -> None:
        text = "".join(json.dumps(row, ensure_ascii=False, default=str) + "\n" for row in rows)
        self._handle.write(text)
        self._handle.flush()

    def close(self) -> None:
        self._handle.close()


def find_resumable(output_dir: str | Path, env_id: str, model: str, identity: dict[str, Any]) -> Path | None:
    """The newest incomplete run dir whose metadata matches ``identity`` on :data:`MATCH_KEYS`."""
    parent = runs_parent(output_dir, env_id, model)
    if not parent.is_dir():
        return None
    for run_dir in sorted((p for p in parent.iterdir() if p.is_dir()), reverse=True):
        meta = read_metadata(run_dir)
        if meta and meta.get("status") != "complete" and mismatches(meta, identity) == []:
            return run_dir
    return None


def mismatches(meta: dict[str, Any], identity: dict[str, Any]) -> list[str]:
    """Keys where a run dir's metadata disagrees with the config trying to resume it."""
    return [key for key in MATCH_KEYS if _normal(meta.get(key)) != _normal(identity.get(key))]


def _normal(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def newest_run_dir(output_dir: str | Path = "outputs") -> Path | None:
    """The most recently modified run dir holding a metadata.json (for `prime eval view`)."""
    root = Path(output_dir) / "evals"
    if not root.is_dir():
        return None
    candidates = [meta.parent for meta in root.glob(f"*/*/{METADATA}")]
    return max(candidates, key=lambda p: (p / METADATA).stat().st_mtime, default=None)
