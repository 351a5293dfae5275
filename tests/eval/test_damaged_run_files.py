"""Readers of run files never trace back: a damaged or odd row is skipped with one warning line naming
the file and line, a damaged field of an object file is left out with a warning, or the command stops
with ``error:`` and exit 2. The TUI never exits 0 on a crash.

The damage is done to files our own jobs wrote (tests/support/report_runs.py); the CLI runs as a subprocess
where what reaches stderr matters, in-process otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import report_runs
from support.cli import prime, prime_process
from support.fault_server import FaultServer

from evalkit.eval.results import read_rows
from evalkit.report.tui import RunsBrowser, RunScreen

HEADLESS = {"TEXTUAL_DRIVER": "textual.drivers.headless_driver:HeadlessDriver"}


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("damaged") / "outputs"
    report_runs.make_eval_runs(out)
    report_runs.make_gepa_run(out)
    return out


def damaged_copy(outputs: Path, tmp_path: Path) -> Path:
    """A copy of the outputs whose eval run (model "tools") and GEPA run hold the issue's damage."""
    out = tmp_path / "outputs"
    shutil.copytree(outputs, out)
    run = next((out / "evals" / "toy-tools--tools").iterdir())
    lines = (run / "results.jsonl").read_bytes().splitlines(keepends=True)
    rows = [json.loads(line) for line in lines]
    rows[2]["reward"] = "abc"
    rows[3]["metrics"] = [1, 2]
    lines[2], lines[3] = (json.dumps(r).encode() + b"\n" for r in rows[2:4])
    lines[4] = lines[4].replace(b'"reward": ', b'"reward": NaN, "x": ', 1)
    lines[5] = b'{"example_id": 9, "rollout_idx": 0, "text": "\xff\xfe"}\n'
    (run / "results.jsonl").write_bytes(b"".join(lines))
    meta = json.loads((run / "metadata.json").read_text())
    meta["rollouts_per_example"] = "x"
    meta["avg_reward"] = "high"
    (run / "metadata.json").write_text(json.dumps(meta))
    gepa = out / "gepa" / "toy--scripted" / "run1"
    candidates = [json.loads(line) for line in (gepa / "results.jsonl").read_text().splitlines()]
    candidates[0]["info"]["candidate_idx"] = "seed"
    (gepa / "results.jsonl").write_text("".join(json.dumps(c) + "\n" for c in candidates))
    return out


def test_view_and_html_skip_damaged_rows_with_one_warning_line(outputs, tmp_path):
    """Before: ValueError / AttributeError / UnicodeDecodeError tracebacks from `prime eval view` and `--html`."""
    out = damaged_copy(outputs, tmp_path)
    run = next((out / "evals" / "toy-tools--tools").iterdir())
    view = prime_process("eval", "view", str(run))
    html = prime_process("eval", "view", str(run), "--html")
    for done in (view, html):
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
        assert len(warnings) == 2, done.stderr  # one per damaged file
        rows_warning = next(w for w in warnings if "results.jsonl" in w)
        assert f"{run / 'results.jsonl'}: skipped 4 damaged lines" in rows_warning
        assert "line 3: reward is \"abc\", not a finite number" in rows_warning
        assert "line 4: metrics is [1, 2], not an object of finite numbers" in rows_warning
        assert "line 5: reward is nan" in rows_warning and "1 more" in rows_warning
        assert "rollouts_per_example is \"x\", not a whole number" in next(w for w in warnings if "metadata.json" in w)
    assert "8 (2 examples)" not in view.stdout and "rollouts" in view.stdout
    assert (run / "report.html").is_file()
    gepa = out / "gepa" / "toy--scripted" / "run1"
    shown = prime_process("eval", "view", str(gepa), "--html")
    assert shown.returncode == 0 and "info.candidate_idx is \"seed\", not a whole number" in shown.stderr


def test_resume_over_a_non_utf8_line_and_an_errored_row(tmp_path):
    """Before: UnicodeDecodeError in drop_rows (the rewrite of results.jsonl before retrying errors)."""
    args = [
        "eval",
        "run",
        "reverse-text",
        "-m",
        "stub",
        "-n",
        "2",
        "-r",
        "2",
        "--max-retries",
        "0",
        "-o",
        str(tmp_path),
    ]
    broken = FaultServer("--fail-every", "2")
    try:
        first = prime(*args, "-b", broken.base_url, "-c", "1")
    finally:
        broken.stop()
    assert first.exit_code == 0, first.output
    (run,) = (tmp_path / "evals" / "reverse-text--stub").iterdir()
    with (run / "results.jsonl").open("ab") as handle:
        handle.write(b'{"example_id": 1, "rollout_idx": 1, "completion": "\xff"}\n')
    healthy = FaultServer()
    try:
        resumed = prime(*args, "-b", healthy.base_url, "-R")
    finally:
        healthy.stop()
    assert resumed.exit_code == 0, resumed.output
    assert "running again 2 rollouts that errored" in resumed.output
    rows = read_rows(run)
    assert len(rows) == 4 and not any(row["error"] for row in rows)
    assert b"\xff" in (run / "results.jsonl").read_bytes()  # the damaged line is kept as it was, never run over


def test_resume_over_a_metadata_field_of_the_wrong_type(tmp_path):
    """Before: `--resume` over ``"duration_s": "abc"`` printed a traceback (``float(...)`` in the runner)."""
    args = ["eval", "run", "reverse-text", "-m", "stub", "-n", "2", "-r", "1", "-o", str(tmp_path)]
    server = FaultServer()
    try:
        first = prime(*args, "-b", server.base_url)
        assert first.exit_code == 0, first.output
        (run,) = (tmp_path / "evals" / "reverse-text--stub").iterdir()
        meta = json.loads((run / "metadata.json").read_text())
        meta.update(duration_s="abc", status="incomplete")
        (run / "metadata.json").write_text(json.dumps(meta))
        first_row = (run / "results.jsonl").read_bytes().splitlines(keepends=True)[0]
        (run / "results.jsonl").write_bytes(first_row)  # killed after one rollout
        resumed = prime_process(*args, "-b", server.base_url, "-R")
    finally:
        server.stop()
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    assert 'ignored duration_s is "abc", not a finite number' in resumed.stderr
    assert isinstance(json.loads((run / "metadata.json").read_text())["duration_s"], float), (
        resumed.stdout + resumed.stderr
    )


async def test_tui_opens_damaged_runs_and_shows_the_warnings(outputs, tmp_path):
    """Before: the TUI crashed at start-up on a damaged run under -o (and `prime eval tui` exited 0)."""
    out = damaged_copy(outputs, tmp_path)
    app = RunsBrowser(out)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause()
        for _ in range(len(app.screen.runs)):
            await pilot.press("enter")
            await pilot.pause()
            assert isinstance(app.screen, RunScreen) and app.screen.rows
            await pilot.press("enter", "escape", "escape", "down")
            await pilot.pause()
        shown = [n.message for n in app._notifications]
    assert app.return_code in (None, 0)
    assert any("avg_reward is \"high\"" in message for message in shown), shown
    assert any("skipped 4 damaged lines" in message for message in shown), shown


def test_tui_that_crashes_does_not_exit_0(outputs, tmp_path):
    script = tmp_path / "crashing_tui.py"
    script.write_text(
        "import sys\n"
        "import evalkit.report.tui as tui\n"
        "def boom(*args, **kwargs):\n"
        "    raise RuntimeError('listing runs failed')\n"
        "tui.find_runs = boom\n"
        f"sys.argv = ['prime', 'eval', 'tui', '-o', {str(outputs)!r}]\n"
        "from primekit_cli.app import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **HEADLESS, "TEXTUAL_PRESS": "q"})
    assert done.returncode == 1 and "listing runs failed" in done.stdout + done.stderr


def test_gepa_resume_stops_on_a_damaged_budget_and_skips_damaged_metadata_fields(tmp_path):
    from support.scripted_client import ScriptedClient

    from evalkit.core.errors import UserError
    from evalkit.core.readback import GEPA_METADATA, read_object
    from gepa_cli.config import EnvSpec, GepaJobConfig
    from gepa_cli.runner import run_gepa

    run_dir = report_runs.make_gepa_run(tmp_path / "outputs")
    meta = json.loads((run_dir / "metadata.json").read_text())
    meta["duration_s"] = "long"
    meta["num_rollout_errors"] = "none"
    (run_dir / "metadata.json").write_text(json.dumps(meta))
    kept = read_object(run_dir / "metadata.json", GEPA_METADATA)
    assert "duration_s" not in kept and "num_rollout_errors" not in kept and kept["total_metric_calls"] == 12
    (run_dir / "budget.json").write_text('{"max_calls": 40, "used": "twelve"}')
    config = GepaJobConfig(envs=[EnvSpec(id="toy")], model="scripted", max_calls=60, num_train=6, num_val=4,
                           minibatch_size=2, run_dir=str(run_dir))
    clients = (ScriptedClient(report_runs.gepa_task), ScriptedClient(report_runs.gepa_teacher, model="teacher"))
    with pytest.raises(UserError, match=r"budget.json is damaged \(used is \"twelve\", not a whole number\), so the "
                                        r"rollouts this run spent are unknown"):
        run_gepa(config, resume=run_dir, clients=clients, envs=[report_runs.gepa_env()], show_progress=False)


@pytest.mark.slow
def test_rl_view_and_resume_readers_over_damaged_metrics_and_checkpoint(tmp_path):
    from evalkit.core.errors import UserError
    from rl_backend.checkpoints import load_checkpoint
    from rl_backend.runner import recorded_evals

    run_dir = report_runs.make_rl_run(tmp_path)
    evals = recorded_evals(run_dir / "metrics.jsonl")
    with (run_dir / "metrics.jsonl").open("ab") as handle:
        handle.write(b'{"step": "two", "loss": 1.0}\nnot json\n{"step": 1, "eval_reward": "abc"}\n')
    view = prime_process("eval", "view", str(run_dir), "--html")
    assert view.returncode == 0 and "Traceback" not in view.stderr, view.stderr
    assert f"{run_dir / 'metrics.jsonl'}: skipped 3 damaged lines (line " in view.stderr
    assert recorded_evals(run_dir / "metrics.jsonl") == evals and sorted(evals) == [0, 1, 2]

    (run_dir / "checkpoints" / "step_2" / "state.json").write_text('{"step": 2, "cursor": "end"}')
    with pytest.raises(UserError, match=r"step_2 is damaged \(state.json: cursor is \"end\", not a whole number\); "
                                        r"resume from another step with --resume STEP \(available: 2\)"):
        load_checkpoint(run_dir, 2, policy=None)
