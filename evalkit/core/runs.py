"""Run directories of every job (eval, GEPA, RL): their names, the newest one, resume checks, the lock.

Layout under an output root (a parameter everywhere; see :func:`outputs_root` for the default)::

    <root>/evals/<env>--<model>/<run-id>/      prime eval run
    <root>/gepa/<env>--<model>/<run-id>/       prime gepa run
    <root>/rl/<run_name | env-YYYYmmdd-HHMMSS>/  prime rl run

The default root is where verifiers puts it: ``environments/<module>/outputs/`` for an environment
that lives in the environments folder (``--env-dir-path``, default ``./environments``) or is given as
a folder, ``./outputs/`` for built-in and installed environments. ``-o`` names another root.

``<env>--<model>`` comes from :func:`run_slug` only: the environment's last path part (owner prefix
and folders dropped; several environments joined with ``+``), then the model with ``/`` written as
``--``; characters outside ``[A-Za-z0-9._+-]`` become ``-``. A run id (:func:`new_run_id`) starts
with the UTC start time, so sorting names sorts runs by age; :func:`newest_run` relies on that.

The files and folders of a run dir are named here (``METADATA``, ``RESULTS``, ...); every writer and
reader (the eval runner, GEPA's outputs, the RL trainer, reports, the TUI) imports these names.

``--resume``: :meth:`ResumeRequest.parse` reads the option's value (nothing, a bare flag, a run dir,
for RL a step number); :func:`resolve_run` turns it into a run dir by the job's :class:`RunDirs`
rules (called once per command). Resume checks: a job records what must stay the same in its
``metadata.json``; :func:`mismatches` names the keys that differ and :func:`require_same` turns them
into one ``UserError``.

The lock: a run dir belongs to one process at a time. :class:`RunLock` holds an exclusive
``flock`` on ``<run>/.lock`` (which records the holder's pid) for the life of the run; a second
process gets ``error: run dir ... is in use by pid N``. The kernel drops the lock when the holder
exits, ``kill -9`` included, so a lock is never stale (a killed holder leaves the file, which the next
run simply locks again); a run that ends normally removes the file. On systems without ``fcntl``
(Windows) there is no lock.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from evalkit.core.errors import UserError
from evalkit.core.readback import EVAL_METADATA, GEPA_METADATA, checked_object, read_object

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

# ----- the files and folders of a run dir ---------------------------------------------------------
METADATA = "metadata.json"
"""Eval and GEPA runs (and RL's baseline and periodic evals): settings, status and summary."""
RESULTS = "results.jsonl"
"""Eval: one row per rollout, appended per group. GEPA: one row per candidate."""
PARETO_FRONTIER = "pareto_frontier.jsonl"
"""GEPA: the validation examples each candidate is best on."""
SYSTEM_PROMPT = "system_prompt.txt"
"""GEPA: the best candidate's system prompt."""
BUDGET = "budget.json"
"""GEPA: rollouts spent and reflection calls (what a resume counts on from)."""
GEPA_LOG = "gepa.log"
RESOLVED_CONFIG = "config.resolved.toml"
"""RL: the config the run trains with (written first; a resume must keep its model, envs and buffer)."""
METRICS = "metrics.jsonl"
"""RL: one line per training step and per periodic eval."""
BASELINE = "baseline.json"
"""RL: the baseline checks' verdict."""
BASELINE_DIR = "baseline"
"""RL: the baseline's eval run dir (``baseline/<env>/`` for each of several environments)."""
EVALS_DIR = "evals"
"""RL: the periodic evals' run dirs, ``evals/step_N/``."""
ROLLOUTS_DIR = "rollouts"
"""RL: each step's rollouts, ``rollouts/step_N.jsonl``."""
CHECKPOINTS_DIR = "checkpoints"
WEIGHTS_DIR = "weights"
SWEEPS_DIR = "sweeps"
SWEEP_FILE = "sweep.json"
"""A checkpoint sweep's record (``<rl run>/sweeps/<env>/sweep.json``) beside its ``step_N/`` eval run dirs."""
"""An RL run's checkpoint sweeps (``prime eval run -m RUN/weights --steps ...``): ``sweeps/<env>/step_N/``."""
LOCK_FILE = ".lock"

EVAL_JOB, GEPA_JOB, RL_JOB, SFT_JOB = "evals", "gepa", "rl", "sft"
"""The folders of each job's runs under an output root."""
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def _safe(text: str) -> str:
    return _UNSAFE.sub("-", text).strip("-") or "x"


def env_slug(env_id: str) -> str:
    """``primeintellect/reverse-text`` -> ``reverse-text``; ``./environments/my_env/`` -> ``my_env``."""
    return _safe(env_id.rstrip("/").split("/")[-1])


def model_slug(model: str) -> str:
    """``Qwen/Qwen3-8B`` -> ``Qwen--Qwen3-8B``; ``local/smollm2-135m`` -> ``local--smollm2-135m``."""
    return _safe(model.strip("/").replace("/", "--"))


def run_slug(env_ids: str | Sequence[str], model: str) -> str:
    """The ``<env>--<model>`` folder name shared by eval and GEPA runs."""
    ids = [env_ids] if isinstance(env_ids, str) else list(env_ids)
    return "+".join(env_slug(env_id) for env_id in ids) + "--" + model_slug(model)


def runs_parent(output_root: str | Path, kind: str, env_ids: str | Sequence[str], model: str) -> Path:
    """``<output_root>/<kind>/<env>--<model>``, the folder holding one env+model's runs of a job."""
    return Path(output_root) / kind / run_slug(env_ids, model)


DEFAULT_OUTPUT_ROOT = "outputs"
DEFAULT_ENV_DIR = "environments"


def outputs_root(
    env_id: str | None, env_dir_path: str | Path | None = None, output_dir: str | Path | None = None
) -> Path:
    """Where a job's run dirs go: ``output_dir`` when given, else the local environment's ``outputs/``, else
    ``./outputs``.

    An environment is local when ``env_id`` is a path to a folder (``./environments/my_env``) or
    ``<env_dir_path>/<module>/`` exists (``my-env`` -> ``environments/my_env/``), as verifiers decides.
    """
    if output_dir is not None:
        return Path(output_dir)
    if env_id:
        if env_id.startswith((".", "/", "~")):
            folder = Path(env_id).expanduser()
            if folder.is_dir():
                return folder / "outputs"
        else:
            folder = Path(env_dir_path or DEFAULT_ENV_DIR) / env_id.rstrip("/").split("/")[-1].replace("-", "_")
            if folder.is_dir():
                return folder / "outputs"
    return Path(DEFAULT_OUTPUT_ROOT)


def default_output_roots(env_dir_path: str | Path | None = None) -> list[Path]:
    """Every root :func:`outputs_root` may pick without ``-o``: ``./outputs`` and each local environment's
    ``outputs/``."""
    env_dir = Path(env_dir_path or DEFAULT_ENV_DIR)
    local = sorted(env_dir.glob("*/outputs")) if env_dir.is_dir() else []
    return [Path(DEFAULT_OUTPUT_ROOT), *[p for p in local if p.is_dir()]]


def timestamp() -> str:
    """UTC ``YYYYmmdd-HHMMSS``: sorts as it reads."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime())


def new_run_id() -> str:
    """The start time plus a short random suffix: sortable by age, never colliding."""
    return f"{timestamp()}-{secrets.token_hex(3)}"


def new_run_dir(parent: str | Path) -> Path:
    """A fresh run dir's path under ``parent`` (not created: a run that fails at once leaves nothing)."""
    return Path(parent) / new_run_id()


STEP_DIR = re.compile(r"^step_(\d+)$")
"""Per-step folders: an RL run's ``checkpoints/step_N``, ``weights/step_N``, ``evals/step_N``; a sweep's ``step_N``."""


STEP_GLOB = "step_*"


def step_name(step: int) -> str:
    """The name of step ``step``'s folder (``step_N``); a file of that step adds its suffix (``step_N.jsonl``)."""
    return f"step_{step}"


def step_dir(folder: str | Path, step: int) -> Path:
    """``folder/step_N``: a checkpoint, a weight export, a periodic eval or a sweep's eval of step N."""
    return Path(folder) / step_name(step)


def step_numbers(folder: str | Path) -> list[int]:
    """The N of every ``step_N`` folder directly in ``folder``, ascending (empty when it does not exist)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(int(m.group(1)) for p in folder.iterdir() if p.is_dir() and (m := STEP_DIR.match(p.name)))


def newest_run(candidates: Iterable[Path], accept: Callable[[Path], bool] | None = None) -> Path | None:
    """The newest (by name, i.e. start time) folder among ``candidates`` that ``accept`` takes."""
    for path in sorted((p for p in candidates if p.is_dir()), key=lambda p: p.name, reverse=True):
        if accept is None or accept(path):
            return path
    return None


def newest_in(parent: str | Path, accept: Callable[[Path], bool] | None = None) -> Path | None:
    """:func:`newest_run` over the folders directly under ``parent`` (None when it does not exist)."""
    parent = Path(parent)
    return newest_run(parent.iterdir(), accept) if parent.is_dir() else None


def read_metadata(run_dir: str | Path) -> dict[str, Any] | None:
    """A run dir's ``metadata.json`` through the validated reader (a field of the wrong type is left out with a
    warning, so a hand-edited ``"duration_s": "abc"`` cannot crash a resume), or None when it is missing or
    damaged."""
    path = Path(run_dir) / METADATA
    if not path.is_file():
        return None
    data = read_object(path)
    gepa = "gepa" in (data.get("kind"), data.get("eval_kind")) or (Path(run_dir) / PARETO_FRONTIER).is_file()
    return checked_object(data, GEPA_METADATA if gepa else EVAL_METADATA, path) or None


def has_metadata(run_dir: Path) -> bool:
    return (run_dir / METADATA).is_file()


def mismatches(
    saved: Mapping[str, Any], wanted: Mapping[str, Any], keys: Iterable[str], defaults: Mapping[str, Any] | None = None
) -> list[str]:
    """Keys whose values differ between what a run recorded and what a resume asks for.

    A key missing on one side takes its value from ``defaults`` (a setting added after older runs
    were written compares equal to its default).
    """
    defaults = defaults or {}
    return [
        key for key in keys if _normal(saved.get(key, defaults.get(key))) != _normal(wanted.get(key, defaults.get(key)))
    ]


def require_same(
    run_dir: Path, saved: Mapping[str, Any], wanted: Mapping[str, Any], keys: Iterable[str], *,
    defaults: Mapping[str, Any] | None = None, hint: str = "pass the same settings, or start a new run",
) -> None:
    """UserError naming each differing key and its recorded value, when a resume would mix settings."""
    differ = mismatches(saved, wanted, keys, defaults)
    if differ:
        detail = ", ".join(f"{key}={saved.get(key, (defaults or {}).get(key))!r}" for key in differ)
        raise UserError(f"cannot resume {run_dir}: it was run with different settings ({detail}); {hint}")


def _normal(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def newest_eval_run(output_dir: str | Path | None = None) -> Path | None:
    """The newest eval run dir (by run id) holding a metadata.json, for `prime eval view`.

    Without ``output_dir``: the newest under every default root (:func:`default_output_roots`).
    """
    roots = [Path(output_dir)] if output_dir is not None else default_output_roots()
    return newest_run([path for root in roots for path in root.joinpath(EVAL_JOB).glob("*/*")], has_metadata)


# ----- what kind of run a folder holds, and where runs are ----------------------------------------------
Kind = Literal["eval", "gepa", "rl", "sft", "sweep"]
RL_MARKERS = (RESOLVED_CONFIG, METRICS, BASELINE, CHECKPOINTS_DIR)
"""What an RL run writes first: its resolved config, then its baseline, metrics and checkpoints."""


def is_rl_run(path: Path) -> bool:
    """A folder an RL training run started in."""
    return any((path / name).exists() for name in RL_MARKERS)


def is_sft_run(path: Path) -> bool:
    """A training run dir whose resolved config is `prime sft run`'s (a ``data`` file, no ``[[env]]``)."""
    from evalkit.core.tomlio import read_run_toml

    config = read_run_toml(path / RESOLVED_CONFIG)
    return config is not None and "data" in config and "env" not in config


def detect_kind(path: Path) -> Kind | None:
    """The kind of run in ``path``, or ``None`` when it holds none of a run's files.

    - a checkpoint sweep (``<rl run>/sweeps/<env>``): ``sweep.json`` beside ``step_N/`` eval run dirs;
    - RL (``<out>/rl/<run>``): any of :data:`RL_MARKERS`; SFT (``<out>/sft/<run>``, the same layout): those
      markers with a resolved config that names a ``data`` file and no ``[[env]]``;
    - GEPA (``<out>/gepa/<env>--<model>/<run>``): ``metadata.json`` saying ``kind``/``eval_kind`` ``"gepa"``, or a
      ``pareto_frontier.jsonl`` (our layout and verifiers' ``save_gepa_results`` one);
    - eval (``<out>/evals/<env>--<model>/<run>``, and eval dirs inside RL runs): ``results.jsonl`` or ``metadata.json``.
    """
    if (path / SWEEP_FILE).is_file():
        return "sweep"
    if is_rl_run(path):
        return "sft" if is_sft_run(path) else "rl"
    meta = read_object(path / METADATA)
    if (path / PARETO_FRONTIER).is_file() or "gepa" in (meta.get("kind"), meta.get("eval_kind")):
        return "gepa"
    if (path / RESULTS).is_file() or (path / METADATA).is_file():
        return "eval"
    return None


def require_kind(path: Path) -> Kind:
    """``detect_kind`` for a folder the user named: a clear error when it is not a run dir."""
    if not path.is_dir():
        raise UserError(f"{path} is not a folder; pass a run dir such as outputs/evals/<env>--<model>/<run-id>")
    kind = detect_kind(path)
    if kind is None:
        raise UserError(
            f"{path} is not a run dir (no {RESULTS}, {METADATA}, {METRICS} or {SWEEP_FILE} in it); "
            "pass an eval, GEPA, RL or SFT run dir or a checkpoint sweep"
        )
    return kind


def require_one_kind(paths: list[Path]) -> Kind:
    """The kind shared by all ``paths``; one report cannot mix eval, GEPA and RL runs."""
    kinds = [require_kind(path) for path in paths]
    if len(set(kinds)) > 1:
        mixed = ", ".join(f"{path} ({kind})" for path, kind in zip(paths, kinds))
        raise UserError(f"runs of different kinds cannot share one report: {mixed}; view them one kind at a time")
    return kinds[0]


@dataclass(frozen=True)
class RunRef:
    """One run found under an output folder (what the TUI lists)."""

    kind: Kind
    path: Path
    mtime: float


def find_runs(output_dir: str | Path) -> list[RunRef]:
    """Every run under ``output_dir`` (evals, gepa, rl, sft, and eval dirs inside RL runs), newest first."""
    root = Path(output_dir)
    candidates: list[Path] = []
    candidates += [p for p in root.glob(f"{EVAL_JOB}/*/*") if p.is_dir()]
    candidates += [p for p in root.glob(f"{GEPA_JOB}/*/*") if p.is_dir()]
    candidates += [p for p in root.glob(f"{SFT_JOB}/*") if p.is_dir()]
    for rl_run in (p for p in root.glob(f"{RL_JOB}/*") if p.is_dir()):
        candidates.append(rl_run)
        inside = [rl_run / BASELINE_DIR, *rl_run.glob(f"{BASELINE_DIR}/*"), *rl_run.glob(f"{EVALS_DIR}/*"),
                  *rl_run.glob(f"{EVALS_DIR}/*/*"), *rl_run.glob(f"{SWEEPS_DIR}/*/{STEP_GLOB}")]
        candidates += [p for p in inside if p.is_dir()]  # evals/step_N/<env>/: one per environment of a mixture
    found = []
    for path in candidates:
        kind = detect_kind(path)
        if kind is not None:
            found.append(RunRef(kind, path, _mtime(path)))
    return sorted(found, key=lambda run: run.mtime, reverse=True)


def _mtime(path: Path) -> float:
    stamps = [f.stat().st_mtime for f in path.iterdir() if f.is_file()]
    return max(stamps, default=path.stat().st_mtime)


# ----- --resume ------------------------------------------------------------------------------------
LATEST = "latest"
"""The value a bare ``--resume`` gets on the command line: "the newest matching run"."""


@dataclass(frozen=True)
class ResumeRequest:
    """What ``--resume`` asked for: nothing (a new run), a bare flag (the newest run this config may
    continue), a named run dir, or (RL) a checkpoint step of the newest run."""

    resume: bool = False
    run_dir: Path | None = None
    step: int | None = None

    @classmethod
    def parse(cls, value: ResumeRequest | str | Path | bool | int | None, *, steps: bool = False) -> ResumeRequest:
        """``None``/``False``: a new run; ``True``/``"latest"``: the newest run; an int (or, with
        ``steps``, a string of digits): that step of the newest run; anything else: a run dir."""
        if isinstance(value, ResumeRequest):
            return value
        if value is None or value is False:
            return cls()
        if value is True or value == LATEST:
            return cls(resume=True)
        if isinstance(value, int) or (steps and isinstance(value, str) and value.isdigit()):
            return cls(resume=True, step=int(value))
        return cls(resume=True, run_dir=Path(value).expanduser())


@dataclass
class ResolvedRun:
    """The run dir a command works in, and what :func:`resolve_run` found there."""

    run_dir: Path
    resuming: bool
    """Whether ``run_dir`` holds a run that this command continues."""
    step: int | None = None
    """RL: the checkpoint step asked for (None: the newest)."""
    metadata: dict[str, Any] | None = None
    """The run's metadata.json as found (read once, here); None for a new run or a run without one."""
    notes: list[str] = field(default_factory=list)
    """What a person should be told (which run is resumed, why none is)."""


def _always(path: Path) -> bool:
    return True


def _never(path: Path) -> bool:
    return False


@dataclass(frozen=True)
class RunDirs:
    """One job's rules for the run dirs of one config, applied by :func:`resolve_run`."""

    parent: Path | None
    """The folder holding this config's runs; None when only a named run dir can be resolved (GEPA's
    ``--resume RUN_DIR``, whose saved config says where its runs live)."""
    holds_run: Callable[[Path], bool]
    """Whether a folder holds a run of this job."""
    check: Callable[[Path], None]
    """Raises UserError when a run dir named by ``--resume`` (or, for eval, a ``fixed`` one holding a
    run) cannot be continued by this config."""
    fixed: Path | None = None
    """The run dir the config names (eval's ``run_dir``, GEPA's ``-o``, RL's ``run_name``): a new run
    goes there, and a bare ``--resume`` looks only there."""
    new_name: Callable[[], str] = new_run_id
    pattern: str = "*"
    """The folders under ``parent`` that are this config's runs (RL: ``<env>-*``)."""
    fits: Callable[[Path], bool] = _always
    """Whether a bare ``--resume`` may continue a run (eval: recorded with the same settings)."""
    done: Callable[[Path], bool] = _never
    """A finished run, which a bare ``--resume`` passes over for an unfinished one (eval: ``complete``)."""
    taken: Callable[[Path], str | None] | None = None
    """What a new run does with a dir that already holds a run: unset, it continues that run (after
    ``check``; eval); else the error this returns refuses it, or (None returned) the new run starts
    there (RL: a run refused at its baseline checks, which never trained)."""
    none_found: Callable[[Path], str] | None = None
    """The error when a bare ``--resume`` finds no run (given where it looked); None: a new run starts."""
    flag: str = "--resume"


def resolve_run(dirs: RunDirs, request: ResumeRequest) -> ResolvedRun:
    """The run dir of a command, by ``dirs``' rules: a named dir (checked), the newest run a bare
    ``--resume`` may continue, or a new run (``fixed`` or a new name under ``parent``)."""
    if request.run_dir is not None:
        dirs.check(request.run_dir)
        return _resumed(request.run_dir, request, f"resuming {request.run_dir}")
    if request.resume:
        found = _newest_resumable(dirs, request)
        if found is not None:
            return found
    run_dir = dirs.fixed or _parent(dirs) / dirs.new_name()
    if not dirs.holds_run(run_dir):
        notes = ["no earlier run with these settings to resume; starting a new one"] if request.resume else []
        return ResolvedRun(run_dir, False, notes=notes)
    if dirs.taken is not None:
        refusal = dirs.taken(run_dir)
        if refusal is not None:
            raise UserError(refusal)
        return ResolvedRun(run_dir, False)
    dirs.check(run_dir)
    return _resumed(run_dir, request, f"resuming {run_dir}")


def _newest_resumable(dirs: RunDirs, request: ResumeRequest) -> ResolvedRun | None:
    """A bare ``--resume``: the newest unfinished run that fits, else the newest finished one (with a
    note that nothing is left to do); None (or ``none_found``'s error) when there is neither."""
    where = dirs.fixed or _parent(dirs)
    candidates = [dirs.fixed] if dirs.fixed is not None else (list(where.glob(dirs.pattern)) if where.is_dir() else [])

    def resumable(path: Path) -> bool:
        return dirs.holds_run(path) and dirs.fits(path)

    found = newest_run(candidates, lambda path: resumable(path) and not dirs.done(path))
    if found is not None:
        return _resumed(found, request, f"resuming {found}")
    finished = newest_run(candidates, resumable) if dirs.done is not _never else None
    if finished is not None:
        return _resumed(finished, request, f"nothing to resume: the newest run with these settings is complete "
                                           f"({finished}); drop {dirs.flag} to start a new run")
    if dirs.none_found is not None:
        raise UserError(dirs.none_found(where))
    return None


def _resumed(run_dir: Path, request: ResumeRequest, note: str) -> ResolvedRun:
    return ResolvedRun(run_dir, True, step=request.step, metadata=read_metadata(run_dir), notes=[note])


def _parent(dirs: RunDirs) -> Path:
    if dirs.parent is None:
        raise ValueError("these RunDirs resolve only a named run dir (--resume RUN_DIR)")
    return dirs.parent


class RunLock:
    """Exclusive ownership of one run dir for as long as it is held (see the module docstring).

    ``acquire`` creates the folder when needed; ``release(remove_if_unused=True)`` removes a folder
    this lock created and nothing else wrote to, so a run that fails before its first output leaves
    nothing behind. Re-entrant use is not supported: a second lock on the same dir fails even in the
    same process.
    """

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        self._fd: int | None = None
        self._created: list[Path] = []

    def acquire(self) -> RunLock:
        self._created = [p for p in (self.run_dir, *self.run_dir.parents) if not p.exists()]
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if fcntl is None:  # pragma: no cover - Windows: no lock
            return self
        path = self.run_dir / LOCK_FILE
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                raise UserError(
                    f"run dir {self.run_dir} is in use by pid {holder}; wait for that run to end (or stop it), "
                    "or start a new run"
                ) from None
            if _same_file(fd, path):
                break
            os.close(fd)  # the holder removed this file as we opened it; lock the one at the path now
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self, *, remove_if_unused: bool = False) -> None:
        """Give the run dir up: the lock file goes (first, while still locked), then the lock."""
        fd, self._fd = self._fd, None
        if fd is not None:
            (self.run_dir / LOCK_FILE).unlink(missing_ok=True)
        if remove_if_unused:
            for path in self._created:  # innermost first; a folder something was written to stays
                try:
                    path.rmdir()
                except OSError:
                    break
        if fd is not None and fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def __enter__(self) -> RunLock:
        return self.acquire() if self._fd is None else self

    def __exit__(self, *exc: object) -> None:
        self.release(remove_if_unused=True)


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``fd`` is still the file at ``path`` (a releasing holder unlinks it before unlocking)."""
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False
