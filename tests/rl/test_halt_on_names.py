"""`--halt-on` (and `[health] halt_on`) names only alarms that exist, each once (issue 45, item 15): `all` does
not hide a typo beside it."""

from __future__ import annotations

import pytest
from support import REPO
from typer.testing import CliRunner

from primekit_cli.app import app

CONFIG = REPO / "configs" / "rl" / "digit-sums.toml"
KNOWN = ("choose from reward_spread, entropy_collapse, kl_growth, ref_kl_rising, truncation_rising, errors_rising, "
         "reward_drop or all")


def dry_run(halt_on: str):
    return CliRunner().invoke(app, ["rl", "run", str(CONFIG), "--halt-on", halt_on, "--dry-run"])


@pytest.mark.parametrize("halt_on, why", [
    ("all,typo", f"unknown alarm 'typo'; {KNOWN}"),
    ("kl_growth,typo", f"unknown alarm 'typo'; {KNOWN}"),
    ("kl_growth,kl_growth", f"alarm 'kl_growth' named more than once; name each once ({KNOWN})"),
    ("all,all", f"alarm 'all' named more than once; name each once ({KNOWN})"),
])
def test_unknown_and_repeated_alarms_are_refused_with_the_known_names(halt_on: str, why: str):
    result = dry_run(halt_on)
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert result.output.strip() == f"error: {CONFIG}: 'health.halt_on': {why}"


def test_known_alarms_and_all_still_work():
    result = dry_run("all")
    assert result.exit_code == 0, result.output
    assert f"halt on {KNOWN.removeprefix('choose from ').removesuffix(' or all')} (" in result.output
    result = dry_run("kl_growth,reward_drop")
    assert result.exit_code == 0 and "halt on kl_growth, reward_drop (" in result.output, result.output
