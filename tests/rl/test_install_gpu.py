"""`primekit[gpu]` installs together with vllm: pip resolves it (a dry run: metadata only,
nothing installed), choosing the same vllm it would choose for vllm alone.

vllm pins an exact torch (and a transformers range); an exact torch pin of ours would either make
this unresolvable or hold vllm back to the release that happens to pin the same torch. Needs the
package index: skipped, with the reason, when it is unreachable or too slow.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO

pytestmark = [pytest.mark.slow, pytest.mark.network]

ROOT = REPO


def _pip(*args: str, timeout: float) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pip", *args, "--disable-pip-version-check"]
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.skip(f"pip {args[0]} took over {timeout:.0f} s (slow or unreachable package index)")


def _resolve(tmp_path: Path, *requirements: str) -> dict[str, str]:
    report = tmp_path / f"report-{len(list(tmp_path.iterdir()))}.json"
    result = _pip(
        "install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report), *requirements, timeout=300
    )
    if result.returncode != 0 and re.search(
        r"(Network is unreachable|Temporary failure|Max retries exceeded|timed out)", result.stderr
    ):
        pytest.skip(f"the package index is unreachable: {result.stderr.strip().splitlines()[-1]}")
    assert result.returncode == 0, result.stderr[-3000:]
    return {
        item["metadata"]["name"].lower(): item["metadata"]["version"]
        for item in json.loads(report.read_text())["install"]
    }


def test_gpu_extra_resolves_without_holding_vllm_back(tmp_path: Path):
    alone = _resolve(tmp_path, "vllm")
    together = _resolve(tmp_path, f"{ROOT}[gpu]")
    assert "primekit" in together and together["vllm"] == alone["vllm"] and together["torch"] == alone["torch"]
