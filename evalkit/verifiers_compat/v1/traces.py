"""verifiers' own run files in a primekit eval run dir of a v1 taskset, so tools built for verifiers read it.

Beside ``results.jsonl`` an eval run of a v1 taskset gets, as verifiers' ``eval`` writes them:

- ``traces.jsonl``: one ``Episode`` per rollout, serialized by verifiers' own serializer (the installed
  generation's schema: what its ``read_episodes``, its replay command and prime-rl read). Each episode is stamped
  with the run (``run.id``: the run dir's name) and a deterministic ``id`` per ``(example_id, rollout_idx)``, so
  the line of a rollout is found again: a resumed run keeps the lines of the rows it keeps and drops the others
  (rows run again, torn lines of a killed run) before the first new group is written, reading the file one line
  at a time. The file is ours like ``results.jsonl`` (:mod:`evalkit.core.untrusted`): every string in a line keeps at
  most the run's ``max_message_chars`` characters, cut with the same marker, and goes through the same
  redaction (API keys, ``--env-file`` values, auth headers) and UTF-8 repair before it is written;
- ``configs/resolved/eval.json``: the run's resolved ``[env]`` config (``{"env": ...}``), which verifiers'
  replay (``vf-replay <run dir>``) reads to find the taskset.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from evalkit.core.fileio import keep_lines_atomic, write_json_atomic
from evalkit.core.redact import contains_secret
from evalkit.core.types import RolloutState
from evalkit.core.untrusted import cap_strings, clean
from evalkit.verifiers_compat.v1 import api as v1_api
from evalkit.verifiers_compat.v1.episode import EPISODE_KEY

CONFIG_PATH = Path("configs") / "resolved" / "eval.json"
"""Where verifiers' eval keeps a run's resolved config (replay reads ``configs/resolved/*.json``)."""


def episode_id(run_dir: Path, example_id: int, rollout_idx: int) -> str:
    """The episode id of one rollout of the run in ``run_dir`` (a uuid5, 32 hex digits like verifiers' own)."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"primekit:{run_dir.name}:{example_id}:{rollout_idx}").hex


class TraceFiles:
    """Writes a run dir's ``traces.jsonl`` and resolved config (see the module docstring)."""

    def __init__(self, run_dir: Path, kept: set[tuple[int, int]], env_config: Any):
        self.run_dir = run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        self._keep_only({episode_id(run_dir, eid, idx) for eid, idx in kept})
        config = run_dir / CONFIG_PATH
        config.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(config, {"env": env_config.model_dump(mode="json")})

    def _keep_only(self, ids: set[str]) -> None:
        path = self.run_dir / v1_api.TRACES_FILE
        if not path.exists():
            path.write_bytes(b"")
            return
        keep_lines_atomic(path, lambda line: _line_id(line) in ids)

    def write_group(self, states: list[RolloutState]) -> None:
        """Append the episode of each rollout in ``states`` (taken off the state: it is written once), capped and
        redacted (:func:`trace_line`), in one write."""
        from verifiers.v1 import EvalRunInfo

        lines = []
        for state in states:
            episode = state.extra.pop(EPISODE_KEY, None)
            if episode is None:
                continue
            episode.id = episode_id(self.run_dir, state.example_id, state.rollout_idx)
            episode.record_run(EvalRunInfo(id=self.run_dir.name))
            lines.append(trace_line(v1_api.episode_json(episode), state.max_message_chars))
        if lines:
            with (self.run_dir / v1_api.TRACES_FILE).open("ab") as handle:
                handle.write(b"".join(lines))


def trace_line(data: bytes, limit: int | None) -> bytes:
    """One ``traces.jsonl`` line for an episode serialized as ``data``: as verifiers wrote it when it holds no
    string over ``limit`` characters and nothing to redact; else with every string capped and cleaned
    (:func:`evalkit.core.untrusted.clean`)."""
    text = data.decode("utf-8", errors="surrogatepass")
    if (limit is None or len(text) <= limit) and not contains_secret(text):
        return data + b"\n"
    cleaned, _ = clean(cap_strings(json.loads(text), limit))
    return json.dumps(cleaned, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8") + b"\n"


def _line_id(line: bytes) -> str | None:
    """The ``id`` of one saved episode line; None for a torn or foreign line."""
    try:
        row = json.loads(line)
    except ValueError:
        return None
    return row.get("id") if isinstance(row, dict) else None
