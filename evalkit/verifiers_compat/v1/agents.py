"""Where each of verifiers 0.4's harnesses runs in primekit, and for the ones that do not, what stopped them here.

One table (:data:`HARNESSES`) feeds the refusal line a user gets for a harness primekit does not run
(:func:`~evalkit.verifiers_compat.v1.config.refusal`) and the table in docs/verifiers.md (a test keeps the two the
same). Light on purpose: config checks import it without verifiers' harness classes.
"""

from __future__ import annotations

from dataclasses import dataclass

NODE_NEEDED = (22, 19)
"""The Node.js version verifiers' Node harnesses check for (``verifiers/v1/harnesses/node.py``; it downloads 22.19
from nodejs.org when the image has none)."""
LIVE_PROCESS = ("speaks ACP to a live agent process (the runtime's open_process), which the sandbox runtime does "
                "not run yet")


@dataclass(frozen=True)
class Harness:
    """A verifiers harness: primekit's plugin id per runtime that runs it, else why not (one sentence; for one
    that needs Node.js, :func:`why_not` adds the Node.js found here)."""

    plugins: dict[str, str]
    why_not: str = ""
    node: bool = False


HARNESSES: dict[str, Harness] = {
    "null": Harness({"subprocess": "primekit-harness", "sandbox": "primekit-sandbox-harness"}),
    "bash": Harness({"sandbox": "primekit-sandbox-bash-harness", "subprocess": "primekit-bash-harness"}),
    "mini_swe_agent": Harness({"sandbox": "primekit-sandbox-mini-swe-agent"}),
    "terminus_2": Harness({"sandbox": "primekit-sandbox-terminus-2"}),
    "hermes_agent": Harness({}, "its program is a source tarball of a git tag from github.com, synced with uv "
                                "(unreachable here; the package index's hermes-agent releases are not that tag), "
                                f"and it {LIVE_PROCESS}"),
    "browser_use": Harness({"sandbox": "primekit-sandbox-browser-use"}),
    "codex": Harness({}, f"needs Node.js >= {NODE_NEEDED[0]}.{NODE_NEEDED[1]} for @openai/codex and codex-acp "
                         f"(npm), and it {LIVE_PROCESS}", node=True),
    "claude_code": Harness({}, f"needs Node.js >= {NODE_NEEDED[0]}.{NODE_NEEDED[1]} for @anthropic-ai/claude-code "
                               f"and claude-agent-acp (npm), and it {LIVE_PROCESS}", node=True),
    "pi": Harness({}, f"needs Node.js >= {NODE_NEEDED[0]}.{NODE_NEEDED[1]} for pi-coding-agent and pi-acp (npm), "
                      f"and it {LIVE_PROCESS}", node=True),
    "openclaw": Harness({}, f"installs from an install script on openclaw.ai (not a package index: unreachable "
                            f"here) with its own Node.js, and it {LIVE_PROCESS}"),
    "kimi_code": Harness({}, "installs from an install script on code.kimi.com (not a package index: unreachable "
                             f"here), and it {LIVE_PROCESS}"),
    "prime_agent": Harness({}, "installs release tarballs from github.com (not a package index: unreachable here) "
                               f"with Node.js, and it {LIVE_PROCESS}"),
    "rlm": Harness({}, f"installs from a git clone of github.com (not a package index: unreachable here), and it "
                       f"{LIVE_PROCESS}"),
}


def sandbox_plugin(harness_id: str) -> str | None:
    """primekit's plugin id for verifiers' third-party harness ``harness_id`` on the sandbox runtime, if any."""
    entry = HARNESSES.get(harness_id)
    if entry is None or harness_id in ("null", "bash"):
        return None
    return entry.plugins.get("sandbox")


def why_not(harness_id: str) -> str:
    """Why primekit does not run ``harness_id`` here (empty for one it runs, or one it does not know)."""
    entry = HARNESSES.get(harness_id)
    if entry is None:
        return ""
    return f"{entry.why_not} (this machine: {node_found()})" if entry.node else entry.why_not


def node_found() -> str:
    """The Node.js on PATH and its version, or that there is none."""
    import shutil
    import subprocess

    node = shutil.which("node")
    if node is None:
        return "no node on PATH"
    try:
        version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=15).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        version = "a node that does not run"
    return f"{version or 'unknown version'} at {node}"
