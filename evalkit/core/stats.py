"""Mean and standard deviation of any finite floats, without ``OverflowError``.

A reward function may return any finite float (1e200 is one), and a run's summary, its report and RL's
advantages take means and spreads of them. ``x ** 2`` raises ``OverflowError`` past about 1.3e154 and
``math.fsum`` raises on an intermediate sum past the largest float. Both are computed the usual way first (the
same digits as before for ordinary values) and, when that overflows, on values scaled by the largest magnitude
(each then in [-1, 1]) and scaled back: exact to rounding where the result is representable and ``inf`` (shown as
such) where it is not. A NaN or an infinity among the values gives NaN or
that infinity, as plain arithmetic would, never an exception.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def _scale(values: list[float]) -> float:
    return max((abs(v) for v in values), default=0.0)


def mean(values: Iterable[float]) -> float:
    """The arithmetic mean (NaN for no values)."""
    data = [float(v) for v in values]
    if not data:
        return math.nan
    try:
        return math.fsum(data) / len(data)
    except (OverflowError, ValueError):  # ValueError: fsum of inf and -inf
        pass
    scale = _scale(data)
    if not math.isfinite(scale):
        return sum(data) / len(data)
    if scale == 0.0:
        return 0.0
    return math.fsum(v / scale for v in data) / len(data) * scale


def pstdev(values: Iterable[float], center: float | None = None) -> float:
    """The population standard deviation (around ``center`` when given, else the mean); 0 for no values."""
    data = [float(v) for v in values]
    if not data:
        return 0.0
    middle = mean(data) if center is None else center
    try:
        return math.sqrt(math.fsum((v - middle) ** 2 for v in data) / len(data))
    except (OverflowError, ValueError):
        pass
    scale = max(_scale(data), abs(middle))
    if not math.isfinite(scale):
        return math.nan
    if scale == 0.0:
        return 0.0
    m = middle / scale
    return math.sqrt(math.fsum((v / scale - m) * (v / scale - m) for v in data) / len(data)) * scale


def number(value: float, places: int = 4) -> str:
    """A reward-like number for a person: ``places`` decimals, or ``places`` significant digits once it is too
    large for decimals to be readable (1e200 is a valid reward); ``inf`` and ``nan`` as such."""
    return f"{value:.{places}f}" if abs(value) < 1e9 else f"{value:.{places}g}"
