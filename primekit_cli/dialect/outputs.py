"""verifiers' run-dir layout around a primekit eval run launched from a verifiers 0.4 run config.

Beside ``results.jsonl`` and verifiers' ``traces.jsonl`` (:mod:`~evalkit.verifiers_compat.v1.traces`), such a run
dir gets what verifiers' own ``eval`` writes there, so its conventions work on primekit's runs:

- ``configs/eval.toml``: the launch ``@`` TOML file(s) verbatim (several: each under a ``# @ path`` line);
- ``configs/resolved/eval.json``: verifiers' full resolved config (its own classes' dump), pointed at this run
  dir (``output_dir`` / ``run.dir``), so ``vf-eval @ <run dir>/configs/resolved/eval.json --resume`` and
  ``vf-replay <run dir>`` find the run and its taskset;
- ``logs/attempt_<n>/eval.log`` with ``logs/latest`` pointing at it (made by verifiers' own helper): one log per
  launch, a resume included: the plan's notes, the run's log records (scrubbed of keys) and its outcome.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from evalkit.core.fileio import write_json_atomic, write_text_atomic
from evalkit.core.redact import redact
from evalkit.verifiers_compat.v1.traces import CONFIG_PATH

LAUNCH_TOML = Path("configs") / "eval.toml"
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class RunLog(logging.Handler):
    """The ``evalkit`` log records of one run, kept (scrubbed) for its ``eval.log``; attach with ``with``."""

    def __init__(self, notes: list[str]):
        super().__init__()
        self.setFormatter(logging.Formatter(LOG_FORMAT))
        self.lines = [f"note: {note}" for note in notes]

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(redact(self.format(record)))

    def __enter__(self) -> RunLog:
        logging.getLogger("evalkit").addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("evalkit").removeHandler(self)


def write_layout(run_dir: Path, plan: Any, log: RunLog, outcome: str) -> None:
    """The launch TOML, verifiers' resolved config and this attempt's log, in ``run_dir``."""
    from verifiers.v1.cli.output import create_attempt_log_dir

    tomls = [Path(path) for path in plan.files if path.endswith(".toml")]
    if tomls:
        texts = [redact(path.read_text(encoding="utf-8")) for path in tomls]
        if len(texts) > 1:
            texts = [f"# @ {path}\n{text}" for path, text in zip(tomls, texts)]
        (run_dir / LAUNCH_TOML).parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(run_dir / LAUNCH_TOML, "\n".join(texts))
    resolved = dict(plan.resolved)
    resolved["output_dir"] = str(run_dir.resolve().parent)  # found again from any folder
    resolved["run"] = {**resolved.get("run", {}), "name": run_dir.name, "dir": run_dir.name}
    (run_dir / CONFIG_PATH).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(run_dir / CONFIG_PATH, resolved)
    attempt = create_attempt_log_dir(run_dir)
    write_text_atomic(attempt / "eval.log", "".join(line + "\n" for line in [*log.lines, redact(outcome)]))
