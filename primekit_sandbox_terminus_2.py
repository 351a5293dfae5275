"""The verifiers v1 harness plugin ``primekit-sandbox-terminus-2``: verifiers' ``terminus_2`` harness (harbor's
Terminus 2) inside primekit's bubblewrap sandbox, its packages installed once on the host.

verifiers looks harnesses up by top-level module name, so this module only re-exports
:class:`evalkit.verifiers_compat.v1.sandbox_agents.SandboxTerminus2Harness` (read its module's docstring).
"""

from evalkit.verifiers_compat.v1.sandbox_agents import SandboxTerminus2Harness

__all__ = ["SandboxTerminus2Harness"]
