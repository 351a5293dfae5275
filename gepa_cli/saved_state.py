"""gepa's saved state (``state/gepa_state.bin``) checked before anything unpickles it.

gepa saves its state with :mod:`pickle` and loads it back with a plain ``pickle.load`` (``GEPAState.load``, also
inside ``gepa.optimize`` when it resumes from its run dir). A pickle can name any importable callable and call it,
so a crafted ``gepa_state.bin`` in a run dir someone handed over would run code on ``--resume``. Before gepa
reads the file, :func:`check_state_file` unpickles it with a restricted unpickler that admits only plain builtin
data and the few gepa data classes a saved state holds (its evaluation cache and the type variables of their
generic aliases); anything else is refused in one line. gepa offers no hook to load a state we hand it, so the
library reads the file itself afterwards, under the run dir's lock.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any, TypeVar

from evalkit.core.errors import UserError
from evalkit.core.fileio import FileRefused, read_regular

STATE_FILE = "gepa_state.bin"

_BUILTIN_TYPES = {"set", "frozenset", "complex", "bytearray", "dict", "list", "tuple", "int", "float", "str",
                  "bytes", "bool"}
"""Builtin types a pickle may name (containers and numbers: constructing one runs no user code)."""

_GEPA_DATA = {("gepa.core.state", name) for name in ("EvaluationCache", "CachedEvaluation", "ValsetEvaluation")}
"""gepa's data classes that a saved state holds (plain dataclasses: rebuilding one only sets fields)."""


class RefusedGlobal(pickle.UnpicklingError):
    """The pickle names something outside the allowlist."""


class _Restricted(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in _BUILTIN_TYPES:
            return super().find_class(module, name)
        if (module, name) == ("_operator", "getitem"):  # how pickle writes a generic alias: EvaluationCache[R, D]
            return super().find_class(module, name)
        if (module, name) in _GEPA_DATA:
            return super().find_class(module, name)
        if module.startswith("gepa.core."):  # the type variables of gepa's generic classes, nothing callable
            found = super().find_class(module, name)
            if isinstance(found, TypeVar):
                return found
        raise RefusedGlobal(f"{module}.{name}")


def check_state_file(path: Path) -> bool:
    """Whether ``path`` unpickles as data (False: truncated or not a pickle). A pickle that names code (a function
    or class outside the allowlist), or a path that is not a regular file (a FIFO would block gepa's ``open``), is
    a :class:`UserError`: it is never handed to gepa."""
    try:
        data = _Restricted(io.BytesIO(read_regular(path))).load()
    except FileRefused as refused:
        raise UserError(f"--resume: {path}: {refused.why}; start a new run") from None
    except RefusedGlobal as exc:
        raise UserError(f"--resume: {path} names code ({exc}), which primekit never loads from a run dir; "
                        "start a new run (docs/reliability.md)") from None
    except Exception:  # truncated, not a pickle, or a pickle whose data does not rebuild: damaged
        return False
    return isinstance(data, dict)
