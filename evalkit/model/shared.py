"""One engine per (model, dtype, device) per process, so eval, GEPA, RL and ``prime serve`` share it.

Loading is lazy and happens once: the first caller pays for it (and for the one-time GGUF
conversion), everyone after gets the same :class:`~evalkit.model.engine.Engine`.
"""

from __future__ import annotations

import atexit
import threading
from typing import TYPE_CHECKING

from evalkit.model.devices import check_device, resolve_device
from evalkit.model.dtypes import AUTO, choose_dtype
from evalkit.model.registry import resolve_model, stores_q4

if TYPE_CHECKING:
    from evalkit.model.engine import Engine

DEFAULT_DTYPE = AUTO
DEFAULT_MAX_BATCH = 32
# On an H100 the embedded model made 25,428 tok/s with 256 requests in flight and 2,720 with 32
# (bench/engine.py), so on a GPU eval's -c 256 should run 256 rollouts at once, not queue 224.
DEFAULT_MAX_BATCH_CUDA = 256


def default_max_batch(device: str) -> int:
    """Most sequences an engine decodes together when nobody said: 32 on CPU, 256 on a GPU."""
    return DEFAULT_MAX_BATCH_CUDA if device.startswith("cuda") else DEFAULT_MAX_BATCH

_engines: dict[tuple[str, str, str], Engine] = {}
_lock = threading.Lock()


def get_engine(
    model: str | None = None, *, dtype: str | None = None, max_batch: int | None = None, device: str | None = None
) -> Engine:
    """The process-wide engine for ``model`` in ``dtype`` (default ``auto``: see
    :mod:`evalkit.model.dtypes`) on ``device`` (default
    ``auto``: CUDA when there is a GPU), loading it on first use.

    ``max_batch`` applies when this call is the one that loads the engine. Raises UserError for an
    unknown model, missing weights or a device that is not there.
    """
    source = resolve_model(model)
    where = resolve_device(check_device(device))
    key = (_cache_key(source), choose_dtype(dtype or DEFAULT_DTYPE, where, q4_file=stores_q4(source)).spelling, where)
    with _lock:
        engine = _engines.get(key)
        if engine is None or engine.closed:
            from evalkit.model.engine import Engine

            engine = Engine.from_name(
                source, dtype=dtype or DEFAULT_DTYPE, max_batch=max_batch or default_max_batch(key[2]), device=key[2]
            )
            _engines[key] = engine
        return engine


def shutdown_engines() -> None:
    """Close every shared engine (tests; long-lived processes that are done with the model)."""
    with _lock:
        engines = list(_engines.values())
        _engines.clear()
    for engine in engines:
        engine.close()


atexit.register(shutdown_engines)  # stop workers before interpreter teardown, not during a matmul


def _cache_key(source: object) -> str:
    path = getattr(source, "path", None)
    adapter = getattr(source, "adapter", None)
    if path is None and adapter is None:
        return str(getattr(source, "name"))
    return f"{path}|{adapter}"
