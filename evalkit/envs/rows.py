"""Dataset rows kept as plain dicts when ``datasets`` would hand them back unchanged, so an eval never imports it.

An environment built from a list of dict rows used to turn them into a ``datasets.Dataset`` at once; importing
``datasets`` (and with it pyarrow and pandas) was over half of ``prime eval run``'s start-up. The round trip
``Dataset.from_list(rows).to_list()`` returns the same rows whenever every row has the same shape: the same
keys in the same order, one Python type per field (None anywhere), nested dicts and lists of one shape each
(:func:`plain_rows` checks exactly that). Such rows are kept as they are; any other list still goes through
``datasets``, whose schema rules (missing keys filled with None, ints widened to floats...) then apply as before.

:func:`take_rows` is ``Dataset.shuffle(seed).select(range(n)).to_list()`` on plain rows: the same permutation
(``numpy.random.default_rng(seed).permutation``, imported only to shuffle) and fresh copies of the rows.
"""

from __future__ import annotations

from typing import Any


class _Mixed(Exception):
    """The rows do not share one shape: ``datasets`` would change some of them."""


_ANY = ("any",)
"""The shape of None or of an empty list's items: fits any other shape."""
_INT64 = 2**63


def plain_rows(data: Any) -> list[dict[str, Any]] | None:
    """``data`` as a list when it is a non-empty list or tuple of dict rows that ``datasets`` would return
    unchanged (see the module docstring); None when it is anything else."""
    if not isinstance(data, (list, tuple)) or not data:
        return None
    try:
        shape = _ANY
        for row in data:
            if type(row) is not dict:
                return None
            shape = _merge(shape, _shape(row))
    except _Mixed:
        return None
    return list(data)


def _shape(value: Any) -> Any:
    kind = type(value)
    if value is None:
        return _ANY
    if kind is str or kind is float or kind is bool or kind is bytes:
        return kind
    if kind is int:
        if -_INT64 <= value < _INT64:
            return kind
        raise _Mixed
    if kind is dict:
        if not value or any(type(key) is not str for key in value):
            raise _Mixed
        return ("dict", tuple(value), tuple(_shape(item) for item in value.values()))
    if kind is list:
        inner = _ANY
        for item in value:
            inner = _merge(inner, _shape(item))
        return ("list", inner)
    raise _Mixed


def _merge(a: Any, b: Any) -> Any:
    if a is _ANY or a == b:
        return b
    if b is _ANY:
        return a
    if type(a) is tuple and type(b) is tuple and a[0] == b[0]:
        if a[0] == "list":
            return ("list", _merge(a[1], b[1]))
        if a[0] == "dict" and a[1] == b[1]:
            return ("dict", a[1], tuple(_merge(x, y) for x, y in zip(a[2], b[2])))
    raise _Mixed


def column_names(rows: list[dict[str, Any]]) -> list[str]:
    """The columns of plain rows (every row has the same keys)."""
    return list(rows[0])


def take_rows(rows: list[dict[str, Any]], n: int, seed: int, shuffle: bool) -> list[dict[str, Any]]:
    """Copies of at most ``n`` rows (-1: all), shuffled first as ``Dataset.shuffle(seed=seed)`` shuffles."""
    return [_copy(rows[i]) for i in selection_order(len(rows), n, seed, shuffle)]


def selection_order(length: int, n: int, seed: int, shuffle: bool) -> list[int]:
    """The indices, in a split of ``length`` rows, of the rows :func:`take_rows` (and ``Dataset.shuffle(seed)``
    then ``select(range(n))``) picks, in the order picked: each row's own index, whatever the shuffle."""
    order: list[int] = list(range(length))
    if shuffle:
        import numpy as np

        order = np.random.default_rng(seed).permutation(length).tolist()
    return order[:n] if n is not None and n >= 0 else order


def _copy(value: Any) -> Any:
    """A copy of a row's dicts and lists (the rows are the environment's; callers may change theirs)."""
    if type(value) is dict:
        return {key: _copy(item) for key, item in value.items()}
    if type(value) is list:
        return [_copy(item) for item in value]
    return value
