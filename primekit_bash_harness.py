"""The verifiers v1 harness plugin ``primekit-bash-harness``: verifiers' ``bash`` harness, run offline.

verifiers looks harnesses up by top-level module name, so this module only re-exports
:class:`evalkit.verifiers_compat.v1.harness.OfflineBashHarness` (read its docstring). Needs the
``verifiers`` extra.
"""

from evalkit.verifiers_compat.v1.harness import OfflineBashHarness

__all__ = ["OfflineBashHarness"]
