"""verifiers' third-party agent harnesses (``NEEDS_CONTAINER``) that primekit runs on its ``sandbox`` runtime.

verifiers runs these only in a container, where ``setup`` installs the agent's program with uv from the network.
Here the program's packages (its PEP 723 script's dependencies, pinned by the harness's ``version``) are installed
on the host by pip, once, into primekit's harness cache (:mod:`~evalkit.sandbox.installs`), before the rollout's
timeout starts; the program then runs inside bubblewrap with that environment read-only, the model endpoint bridged
in (:class:`~evalkit.verifiers_compat.v1.sandbox.SandboxRuntime`). Everything else (the program's arguments, its
prompt, the interception endpoint every model call goes through, so the turns, trace and reward) is verifiers'
own ``launch``.

verifiers finds harnesses by module name, so each is exposed as a top-level module (``primekit_sandbox_<id>``).
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from verifiers.v1.harness import Harness
from verifiers.v1.harnesses.browser_use import harness as browser_use
from verifiers.v1.harnesses.browser_use.harness import BrowserUseHarness, BrowserUseHarnessConfig
from verifiers.v1.harnesses.mini_swe_agent import harness as mini_swe_agent
from verifiers.v1.harnesses.mini_swe_agent.harness import MiniSWEAgentHarness, MiniSWEAgentHarnessConfig
from verifiers.v1.harnesses.terminus_2 import harness as terminus_2
from verifiers.v1.harnesses.terminus_2.harness import Terminus2Harness, Terminus2HarnessConfig

from evalkit.model.registry import primekit_home
from evalkit.sandbox.installs import ProgramInstall, ensure_installed, script_metadata
from evalkit.verifiers_compat.v1.sandbox import SandboxSettings, _SandboxProgram


class _InstalledProgram(_SandboxProgram):
    """A sandboxed harness whose PEP 723 program (``SOURCE``, ``{version}`` filled from the config) runs in an
    environment installed on the host."""

    NEEDS_CONTAINER = False
    """verifiers refuses a NEEDS_CONTAINER harness on the runtime it is told (``subprocess``); the bubblewrap
    sandbox around the program is the container here."""
    HARNESS: ClassVar[str]
    """verifiers' id of the harness (the cache folder's name)."""
    SOURCE: ClassVar[str]
    ENV: ClassVar[dict[str, str]] = {}
    """Variables the program gets inside besides the harness's own."""

    def program(self) -> ProgramInstall:
        """The installed environment (installed now if it is not yet: pip, progress on stderr). The version is the
        config's, or where the harness has none (the script pins its packages), the first requirement's pin."""
        version = getattr(self.config, "version", None)
        source = self.SOURCE.replace("{version}", version) if version else self.SOURCE
        requirements, requires_python = script_metadata(source)
        if not version:
            version = requirements[0].split("==", 1)[-1] if requirements and "==" in requirements[0] else "script"
        return ensure_installed(primekit_home(), self.HARNESS, version, requirements, requires_python)

    async def setup(self, runtime: Any) -> None:
        await asyncio.to_thread(self.program)

    def program_env(self) -> dict[str, str]:
        return dict(self.ENV)


class SandboxMiniSweAgentConfig(MiniSWEAgentHarnessConfig):
    sandbox: SandboxSettings = SandboxSettings()


class SandboxMiniSweAgentHarness(_InstalledProgram, MiniSWEAgentHarness, Harness[SandboxMiniSweAgentConfig]):
    """verifiers' ``mini_swe_agent`` (mini-swe-agent with litellm, from the package index) inside the sandbox."""

    HARNESS = "mini_swe_agent"
    SOURCE = mini_swe_agent.PROGRAM_SOURCE
    ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    """litellm would otherwise fetch its price list from GitHub at import (no network inside: a wait, then this)."""


class SandboxTerminus2Config(Terminus2HarnessConfig):
    sandbox: SandboxSettings = SandboxSettings()


class SandboxTerminus2Harness(_InstalledProgram, Terminus2Harness, Harness[SandboxTerminus2Config]):
    """verifiers' ``terminus_2`` (harbor's Terminus 2, from the package index; Python >= 3.12, found by
    :func:`~evalkit.sandbox.installs.find_python`) inside the sandbox: its tmux server is the sandbox's own (its
    ``/tmp``, its PID namespace), so it ends with the rollout."""

    HARNESS = "terminus_2"
    SOURCE = terminus_2.PROGRAM_SOURCE
    ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}


class SandboxBrowserUseConfig(BrowserUseHarnessConfig):
    sandbox: SandboxSettings = SandboxSettings()


class SandboxBrowserUseHarness(_InstalledProgram, BrowserUseHarness, Harness[SandboxBrowserUseConfig]):
    """verifiers' ``browser_use`` (its chat loop with a ``browser`` tool: model-written Python run by browser-harness
    from the package index against a headless Chromium the program starts) inside the sandbox: the system's
    Chromium (``/usr``), its DevTools port on the sandbox's own loopback."""

    HARNESS = "browser_use"
    SOURCE = browser_use.PROGRAM_SOURCE
    ENV = {"BH_RUNTIME_DIR": "/tmp/browser-harness"}
    """browser-harness keeps its daemon's unix socket under the rollout's folder otherwise, a path too long for a
    socket (108 bytes) where that folder lies deep in verifiers' cache; the sandbox's ``/tmp`` is its own."""


__all__ = ["SandboxBrowserUseHarness", "SandboxMiniSweAgentHarness", "SandboxTerminus2Harness"]
