"""The verifiers v1 harness plugin ``primekit-sandbox-bash-harness``: verifiers' ``bash``
program inside primekit's bubblewrap sandbox.

verifiers looks harnesses up by top-level module name, so this module only re-exports
:class:`evalkit.verifiers_compat.v1.sandbox.SandboxBashHarness` (read its docstring). Needs the ``verifiers`` extra.
"""

from evalkit.verifiers_compat.v1.sandbox import SandboxBashHarness

__all__ = ["SandboxBashHarness"]
