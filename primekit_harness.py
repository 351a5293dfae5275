"""The verifiers v1 harness plugin ``primekit-harness``: verifiers' ``null`` chat harness, run offline.

verifiers looks harnesses up by top-level module name, so this module only re-exports
:class:`evalkit.verifiers_compat.v1.harness.OfflineChatHarness` (read its docstring). Needs the
``verifiers`` extra.
"""

from evalkit.verifiers_compat.v1.harness import OfflineChatHarness

__all__ = ["OfflineChatHarness"]
