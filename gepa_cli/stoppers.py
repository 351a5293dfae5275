"""The run's stoppers, built from gepa's own (``gepa.utils``) where it has them, each with a name.

gepa combines the stoppers it is given with ``any`` and reports only that it stopped. Wrapped in
:class:`Named`, the first stopper that fires records its name in a :class:`StopRecord`, which becomes the
run's ``status`` (``metadata.json``, the end summary): ``budget_exhausted``, ``stop_at_score``,
``no_improvement``, ``timeout``, ``reflection_cost``, ``stop_file``. Ctrl-C and SIGTERM stay what they
were (``interrupted``: the running evaluation is abandoned at once, everything written).

Each stopper resumes: the time a resumed run may take counts the earlier invocations' time; the
reflection cost is carried in ``metadata.json``; a stop file found at a resume is removed (it was
meant for the run it stopped); the no-improvement count starts again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.core.errors import UserError
from gepa_cli.background import Throttle
from gepa_cli.outputs import STATE_SUBDIR

STOP_FILE = "gepa.stop"
"""``touch RUN_DIR/gepa.stop`` ends a run after its current proposal (gepa's own stop-file name), the first
one that ends :data:`STOP_FILE_EVERY_S` or more after the last look."""

STOP_FILE_EVERY_S = 0.25
"""The least time between two looks for the stop files: a look is a file-system call between waves of
rollouts, and a fast run ends its proposals every few milliseconds (a run of real models is looked at after
every proposal)."""

PRICES: dict[str, tuple[float, float]] = {
    "gpt-4.1": (2.0, 8.0),
    "gpt-4.1-mini": (0.4, 1.6),
    "gpt-4.1-nano": (0.1, 0.4),
    "gpt-4o": (2.5, 10.0),
    "gpt-4o-mini": (0.15, 0.6),
    "o4-mini": (1.1, 4.4),
    "claude-sonnet-4-5": (3.0, 15.0),
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-opus-4-1": (15.0, 75.0),
}
"""USD per million (input, output) tokens, list prices; a model is looked up by its full name, then by
the part after its last ``/`` (``litellm/anthropic/claude-sonnet-4-5``). ``reflection_prices`` adds to it."""


def price_of(model: str, extra: dict[str, tuple[float, float]], free: bool) -> tuple[float, float]:
    """The teacher's (input, output) price; ``free`` (an in-process model) costs nothing.

    An unpriced teacher is a UserError: a cost cap that silently never fires would be worse than none.
    """
    if free:
        return 0.0, 0.0
    table = {**PRICES, **extra}
    for name in (model, model.rsplit("/", 1)[-1]):
        if name in table:
            return table[name]
    raise UserError(f"max_reflection_cost: no price for teacher '{model}'; add it as "
                    f"reflection_prices = {{ \"{model}\" = [INPUT_USD_PER_M, OUTPUT_USD_PER_M] }} in [gepa] "
                    "(or --reflection-prices JSON)")


@dataclass
class ReflectionCost:
    """The teacher's spend so far, from the token counts its completions report (gepa reads ``total_cost``)."""

    price: tuple[float, float]
    total_cost: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0

    def add(self, usage: Any) -> None:
        tokens_in = int(getattr(usage, "input_tokens", 0) or 0)
        tokens_out = int(getattr(usage, "output_tokens", 0) or 0)
        self.input_tokens += tokens_in
        self.output_tokens += tokens_out
        self.total_cost += (tokens_in * self.price[0] + tokens_out * self.price[1]) / 1e6


class Throttled:
    """A stopper asked at most once per ``every_s`` seconds (in between: not yet; once it fires, the run ends)."""

    def __init__(self, inner: Callable[[Any], bool], every_s: float = STOP_FILE_EVERY_S):
        self.inner = inner
        self.throttle = Throttle(every_s)

    def __call__(self, gepa_state: Any) -> bool:
        return self.throttle.due() and bool(self.inner(gepa_state))


@dataclass
class StopRecord:
    """Which named stopper fired first (None: none did, or the run has not stopped)."""

    reason: str | None = None


@dataclass
class Named:
    """A stopper that writes its name to ``record`` the first time any stopper fires through it."""

    name: str
    inner: Callable[[Any], bool]
    record: StopRecord = field(default_factory=StopRecord)

    def __call__(self, gepa_state: Any) -> bool:
        fired = bool(self.inner(gepa_state))
        if fired and self.record.reason is None:
            self.record.reason = self.name
        return fired


def stop_files(run_dir: Path) -> list[Path]:
    """The stop files watched for ``run_dir``: in the run dir and in its gepa ``state/`` folder."""
    return [run_dir / STOP_FILE, run_dir / STATE_SUBDIR / STOP_FILE]


def check_stop_files(paths: list[Path]) -> None:
    """At a resume, before anything is written: a stop file that cannot be removed by
    :func:`clear_stop_files` (a folder named ``gepa.stop``) is one UserError saying what it is."""
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            raise UserError(f"{path} is a folder, not a stop file; remove it (`rm -r {path}`), then resume")


def clear_stop_files(paths: list[Path], log: Callable[[str], None]) -> None:
    """At a resume: remove stop files left by the stop they caused (a symlink is removed, not followed)."""
    for path in paths:
        if path.exists() or path.is_symlink():
            path.unlink()
            log(f"removed {path} (it stopped the earlier run)")


def _any_file(paths: list[Path], stopper: Callable[[str], Callable[[Any], bool]]) -> Callable[[Any], bool]:
    """One stopper for several stop files (gepa's ``FileStopper`` each): fires when any of them exists."""
    each = [stopper(str(path)) for path in paths]
    return lambda gepa_state: any(one(gepa_state) for one in each)


def optional_stoppers(config: Any, record: StopRecord, *, stop_files: list[Path], elapsed_s: float,
                      cost: ReflectionCost | None) -> list[Named]:
    """The stoppers the search fields ask for, plus the stop files (always watched), as gepa objects."""
    from gepa.utils import FileStopper, MaxReflectionCostStopper, NoImprovementStopper, TimeoutStopCondition

    stoppers = [Named("stop_file", Throttled(_any_file(stop_files, FileStopper)), record)] if stop_files else []
    if config.no_improvement_stop is not None:
        stoppers.append(Named("no_improvement", NoImprovementStopper(config.no_improvement_stop), record))
    if config.max_time is not None:
        stoppers.append(Named("timeout", TimeoutStopCondition(max(0.0, config.max_time - elapsed_s)), record))
    if config.max_reflection_cost is not None and cost is not None:
        stoppers.append(Named("reflection_cost", MaxReflectionCostStopper(config.max_reflection_cost, cost), record))
    return stoppers
