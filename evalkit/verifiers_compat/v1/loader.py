"""Finding verifiers v1 tasksets the way verifiers' own v1 CLI does (``verifiers.v1.utils.loaders``).

verifiers names a v1 taskset by module: the id's last ``/`` part, without ``@version``, ``-`` -> ``_``,
lower-cased; the module exports exactly one ``Taskset`` subclass through ``__all__``; the package's folder
must be on ``sys.path`` (a file path is not accepted). primekit resolves and imports the module first (installed,
then ``./environments/<name>/`` or a path, see :mod:`evalkit.loading.resolve`, which imports a local folder under its
own name with its root on ``sys.path``), then hands verifiers the module's name, so verifiers' own import finds that
same module.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

from evalkit.core.errors import UserError


def taskset_class_of(module: ModuleType) -> type | None:
    """The one v1 ``Taskset`` subclass ``module`` exports via ``__all__`` (None when it exports none).

    Returns None without importing verifiers when the module never imported ``verifiers.v1``.
    """
    if "verifiers.v1" not in sys.modules:
        return None
    from evalkit.verifiers_compat import check_version

    check_version()
    from verifiers.v1.taskset import Taskset

    def is_taskset(obj: Any) -> bool:
        return isinstance(obj, type) and issubclass(obj, Taskset) and obj is not Taskset

    names = getattr(module, "__all__", None)
    if names is None:
        if any(is_taskset(obj) and obj.__module__ == module.__name__ for obj in vars(module).values()):
            raise UserError(
                f"module {module.__name__} defines a verifiers v1 Taskset but no __all__; verifiers finds a taskset "
                "through __all__, e.g. __all__ = ['MyTaskset']"
            )
        return None
    found = [obj for name in names if is_taskset(obj := getattr(module, name, None))]
    if len(found) > 1:
        raise UserError(
            f"module {module.__name__} exports {len(found)} Taskset subclasses via __all__ "
            f"({[c.__name__ for c in found]}); verifiers needs exactly one"
        )
    return found[0] if found else None
