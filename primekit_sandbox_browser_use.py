"""The verifiers v1 harness plugin ``primekit-sandbox-browser-use``: verifiers' ``browser_use`` harness inside
primekit's bubblewrap sandbox, its packages installed once on the host.

verifiers looks harnesses up by top-level module name, so this module only re-exports
:class:`evalkit.verifiers_compat.v1.sandbox_agents.SandboxBrowserUseHarness` (read its module's docstring).
"""

from evalkit.verifiers_compat.v1.sandbox_agents import SandboxBrowserUseHarness

__all__ = ["SandboxBrowserUseHarness"]
