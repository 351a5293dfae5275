"""What differs between the two verifiers v1 generations primekit runs: 0.3.1 and 0.4.x, in one place.

The v1 stack (``Taskset``, ``Env``, ``Trace``, ``Episode``) is the same in both; these moved or were renamed:

- a bounded view of a taskset: ``head(n)`` (0.3.1) became ``take(n)`` (0.4); ``Taskset.INFINITE`` stays on
  the class, but whether a *view* ends is ``view.bounded`` in 0.4 (0.3.1 flipped ``INFINITE`` on the view);
- which tasks ``-n``/``-s`` pick: 0.4's eval selects through ``Taskset.select(SelectConfig)`` (shuffle under a
  seed, then the limit); 0.3.1's shuffles under verifiers' fixed seed, then ``head(n)``;
- verifiers' own ``traces.jsonl`` reader and serializer moved from ``verifiers.v1.cli.output`` (0.3.1) to
  ``verifiers.v1.utils.trace_store`` (0.4); both write one ``Episode`` per line.

Everything else primekit touches (``resolve_env_config``, ``load_environment``, ``Env.serving``,
``Env.run_slot``, ``ModelContext``, the ``null`` harness's ``launch``, which takes more keyword arguments in
0.4) is called the same way in both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

TRACES_FILE = "traces.jsonl"
"""verifiers' name for a run's saved episodes (the same in both generations)."""


def is_bounded(view: Any) -> bool:
    """Whether iterating the taskset view ``view`` ends."""
    bounded = getattr(view, "bounded", None)
    return bool(bounded) if bounded is not None else not view.INFINITE


def take(view: Any, n: int) -> Any:
    """The lazy view of the first ``n`` tasks of ``view``."""
    return view.take(n) if hasattr(view, "take") else view.head(n)


def select(taskset: Any, n: int | None, seed: int, shuffle: bool) -> Any:
    """The tasks verifiers' own eval picks for ``-n n`` (None: all) and ``-s`` (shuffle under ``seed``).

    An unbounded taskset cannot be shuffled whole: there the first ``n`` tasks are shuffled (verifiers' eval
    refuses ``-s`` on one). The caller refuses an unbounded taskset without ``n``.
    """
    if not is_bounded(taskset):
        view = take(taskset, n or 0)
        return view.shuffle(seed) if shuffle else view
    if hasattr(taskset, "select"):
        from verifiers.v1 import SelectConfig

        return taskset.select(SelectConfig(shuffle=shuffle, seed=seed, limit=n))
    view = taskset.shuffle(seed) if shuffle else taskset
    return view.head(n) if n is not None else view


def episode_json(episode: Any) -> bytes:
    """``episode`` as verifiers' own writer serializes it for ``traces.jsonl`` (its schema, its options), without
    the newline: primekit writes the line itself (:mod:`.traces` caps and redacts it first)."""
    try:
        from verifiers.v1.utils.trace_store import type_adapter
    except ImportError:  # verifiers 0.3.1
        from verifiers.v1.cli.output import type_adapter
    return type_adapter(type(episode)).dump_json(episode, exclude_none=True)


def read_episodes(run_dir: Path) -> list[Any]:
    """``run_dir/traces.jsonl`` read back with verifiers' own reader, each trace as a wire ``Trace`` (any
    taskset's file reads without importing it), as verifiers' replay reads a run."""
    from verifiers.v1 import State, Trace, WireTaskData
    from verifiers.v1.configs.agent import WireAgentConfig

    try:
        from verifiers.v1.utils.trace_store import read_episodes as read
    except ImportError:  # verifiers 0.3.1
        from verifiers.v1.cli.output import read_episodes as read
    return read(run_dir, Trace[WireTaskData, State, WireAgentConfig])
