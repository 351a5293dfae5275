"""`prime eval view` reports of eval, GEPA and RL runs: loaders, text, and the HTML page in a real browser.

Run dirs come from our own jobs with scripted or tiny models (tests/support/report_runs.py). The browser
tests open each page in headless Chromium over the DevTools protocol (tests/support/chromium.py), fail on
any console error, uncaught exception or network request, check the numbers in the DOM against the
run's own files, drive the page's script (sort, search, filter), and save a screenshot in tmp_path.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path

import pytest
from support import report_runs
from support.chromium import Browser, find_chromium
from support.cli import prime

from evalkit.report.gepa_data import load_gepa_run
from evalkit.report.html import _num, build_context, render_html, write_report
from evalkit.report.rl_data import load_rl_run

REF_WRITER = Path("/work/ref/verifiers-0.3.1/verifiers/legacy/gepa/gepa_utils.py")


@pytest.fixture(scope="module")
def evals(tmp_path_factory) -> tuple[Path, Path]:
    return report_runs.make_eval_runs(tmp_path_factory.mktemp("evals") / "outputs")


@pytest.fixture(scope="module")
def gepa_run(tmp_path_factory) -> Path:
    return report_runs.make_gepa_run(tmp_path_factory.mktemp("gepa") / "outputs")


@pytest.fixture(scope="module")
def rl_run(tmp_path_factory) -> Path:
    return report_runs.make_rl_run(tmp_path_factory.mktemp("rl"))


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if find_chromium() is None:
        pytest.skip("chromium is not installed (Debian: apt-get install -y chromium; .ci/run installs it)")
    with Browser(tmp_path_factory.mktemp("chromium")) as instance:
        yield instance


def meta(run_dir: Path) -> dict:
    return json.loads((run_dir / "metadata.json").read_text())


def no_network_references(html: str) -> None:
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html), (
        "the page must not load anything from the network"
    )
    assert "@import" not in html and "url(http" not in html


# ----- loaders ---------------------------------------------------------------------------------------


def _verifiers_writer():
    """verifiers 0.3.1's save_gepa_results: from an installed verifiers, else the reference copy."""
    spec = importlib.util.find_spec("verifiers")
    candidates = [Path(spec.origin).parent / "legacy" / "gepa" / "gepa_utils.py"] if spec and spec.origin else []
    for path in [*candidates, REF_WRITER]:
        if path.is_file():
            module_spec = importlib.util.spec_from_file_location("vf_gepa_utils", path)
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)  # stdlib-only module; nothing else of verifiers runs
            return module.save_gepa_results
    pytest.skip("verifiers 0.3.1's GEPA writer is not available (pip install verifiers==0.3.1 to run this test)")


def test_gepa_loader_reads_ours_and_the_verifiers_schema(gepa_run, tmp_path):
    from gepa.core.result import GEPAResult
    from gepa.core.state import GEPAState

    ours = load_gepa_run(gepa_run)
    assert [c.score for c in ours.candidates] == [0.0, 1.0]
    assert ours.best_idx == 1 and ours.best.is_best and ours.seed.prompt == report_runs.SEED_PROMPT
    assert (
        ours.candidates[1].parents == [0]
        and ours.candidates[1].discovered_at_calls == meta(gepa_run)["total_metric_calls"]
    )
    assert ours.diff_lines()[-1] == "+Answer the question. Use KEYWORD."
    assert all(row.best_score == 1.0 and row.candidate_idxs == [1] for row in ours.frontier)

    # the same search, written by verifiers' save_gepa_results from the library's saved state
    save_gepa_results = _verifiers_writer()
    anchor = tmp_path / "anchor"
    anchor.mkdir()
    shutil.copy(gepa_run / "state" / "gepa_state.bin", anchor / "gepa_state.bin")
    result = GEPAResult.from_state(GEPAState.load(str(gepa_run / "state")))
    save_gepa_results(anchor, result, {"env_id": "toy", "model": "scripted", "reflection_model": "teacher"})
    theirs = load_gepa_run(anchor)
    assert [(c.idx, c.prompt, c.score, c.parents, c.subscores) for c in theirs.candidates] == \
        [(c.idx, c.prompt, c.score, c.parents, c.subscores) for c in ours.candidates]
    assert theirs.best_idx == 1 and theirs.diff_lines() == ours.diff_lines()
    assert [(r.example_id, r.best_score, r.candidate_idxs) for r in theirs.frontier] == \
        [(r.example_id, r.best_score, r.candidate_idxs) for r in ours.frontier]
    assert all(c.discovered_at_calls is not None for c in theirs.candidates)
    page = render_html(build_context([anchor]))
    assert "toy" in page and "Use KEYWORD." in page


@pytest.mark.slow
def test_rl_loader_reads_the_eval_dirs_inside_the_run(rl_run, evals, tmp_path):
    run = load_rl_run(rl_run)
    assert [m["step"] for m in run.steps] == [1, 2] and [p.step for p in run.evals] == [0, 1, 2]
    assert run.baseline["passed"] is True and sorted(run.rollout_files) == [1, 2]
    logged = {
        m["step"]: m["eval_reward"]
        for m in (json.loads(line) for line in (rl_run / "metrics.jsonl").read_text().splitlines())
        if "eval_reward" in m
    }
    for point in run.evals:  # <run>/evals/step_N/ are full eval run dirs; their numbers agree with metrics.jsonl
        assert point.run_dir == rl_run / "evals" / f"step_{point.step}" and point.pass_at_1 is not None
        assert (
            point.reward
            == pytest.approx(meta(point.run_dir)["avg_reward"])
            == pytest.approx(logged[point.step], abs=1e-6)
        )
    assert run.baseline_run is not None and run.baseline_run.summary["num_rollouts"] == run.baseline["attempts"]

    copy = tmp_path / "rl"
    shutil.copytree(rl_run, copy)
    shutil.rmtree(copy / "evals" / "step_1")
    shutil.copytree(evals[1], copy / "evals" / "step_1")  # another eval run (mean 0.5): the dir wins over metrics.jsonl
    assert {p.step: p.reward for p in load_rl_run(copy).evals}[1] == pytest.approx(0.5)
    shutil.rmtree(copy / "evals")  # runs from before eval dirs existed: metrics.jsonl alone
    assert {p.step: p.reward for p in load_rl_run(copy).evals} == pytest.approx(logged)


# ----- terminal and command line ---------------------------------------------------------------------


def test_view_text_for_each_kind_and_errors(evals, gepa_run, tmp_path):
    both = prime("eval", "view", str(evals[0]), str(evals[1]))
    assert both.exit_code == 0, both.output
    assert "Comparison" in both.output and "0.8000" in both.output and "0.5000" in both.output
    gepa = prime("eval", "view", str(gepa_run))
    assert gepa.exit_code == 0, gepa.output
    assert "1.000 (candidate 1 of 2)" in gepa.output and "+Answer the question. Use KEYWORD." in gepa.output
    mixed = prime("eval", "view", str(evals[0]), str(gepa_run), "--html")
    assert mixed.exit_code == 2 and "error: runs of different kinds" in mixed.output and "Traceback" not in mixed.output
    missing = prime("eval", "view", str(tmp_path / "nope"))
    assert missing.exit_code == 2 and "is not a folder" in missing.output
    empty = prime("eval", "view", str(tmp_path))
    assert empty.exit_code == 2 and "is not a run dir" in empty.output


def test_view_html_default_and_chosen_paths(evals, tmp_path):
    result = prime("eval", "view", str(evals[0]), "--html")
    assert result.exit_code == 0, result.output
    default = evals[0] / "report.html"
    assert default.is_file() and f"html report: {default}" in " ".join(result.output.split())
    chosen = tmp_path / "cmp.html"
    result = prime("eval", "view", "--html", str(chosen), str(evals[0]), str(evals[1]))
    assert result.exit_code == 0, result.output
    html = chosen.read_text()
    no_network_references(html)
    assert "<svg" in html and "Reward distribution" in html and "server gone (HTTP 503)" in html
    bad = prime("eval", "view", str(evals[0]), "--html", str(tmp_path / "no" / "such" / "x.html"))
    assert bad.exit_code == 2 and "does not exist" in bad.output


def test_a_big_run_keeps_every_rollout_in_the_page(evals, tmp_path):
    """2,000 rollouts (rows of a real run, re-numbered) all reach the page; how fast is bench/report_render.py's."""
    big = report_runs.write_big_run(evals[0], tmp_path / "big", 2_000)
    html = write_report([big]).read_text()
    data = json.loads(
        re.search(r'<script type="application/json" id="rollout-data">(.*?)</script>', html, re.S).group(1)
    )
    assert len(data["rows"]) == 2_000


# ----- in the browser --------------------------------------------------------------------------------

TEXT = "document.body.innerText"


def _visit(browser: Browser, page: Path, script: list[str], shot: Path) -> list:
    values, problems = browser.visit(page.as_uri(), script, shot)
    assert problems.all() == [], f"the page reported problems: {problems.all()}"
    assert shot.is_file() and shot.stat().st_size > 10_000
    return values


def test_eval_comparison_page_in_chromium(browser, evals, tmp_path):
    page = write_report(list(evals), tmp_path / "compare.html")
    a, b = meta(evals[0]), meta(evals[1])
    set_search = (
        "(() => { const box = document.getElementById('f-search'); box.value = 'server gone';"
        " box.dispatchEvent(new Event('input')); return document.getElementById('page-info').textContent; })()"
    )
    sort_by_delta = (
        "(() => { const th = Array.from(document.querySelectorAll('#example-table th'))"
        ".find(h => h.textContent === 'Δ');"
        " th.click(); return document.querySelector('#example-table tbody tr').getAttribute('data-example'); })()"
    )
    open_example = (
        "(() => { document.getElementById('f-reset').click();"
        " document.querySelector('#example-table tr[data-example=\"3\"]').click();"
        " return [document.getElementById('page-info').textContent,"
        " document.getElementById('rollout-list').innerText]; })()"
    )
    text, summary, info, top, (info3, list3) = _visit(browser, page, [
        TEXT, "document.getElementById('summary-table').innerText", set_search, sort_by_delta, open_example,
    ], tmp_path / "eval-compare.png")
    assert f"{a['avg_reward']:.4f}" in summary and f"{b['avg_reward']:.4f}" in summary  # 0.8000 and 0.5000
    assert "2 (16.7%)" in summary and f"pass@{a['rollouts_per_example']}" in summary
    assert "server gone (HTTP 503)" in text and "tokens (in / out)" in text
    assert info.startswith("2 of 24 rollouts")  # the two failed rollouts of q5
    assert top in {"1", "3"}  # sorted by Δ ascending: examples where "even" lost most to "tools"
    assert info3.startswith("4 of 24 rollouts") and "tool call add" in list3 and "41" in list3


def test_gepa_page_in_chromium(browser, gepa_run, tmp_path):
    page = write_report([gepa_run], tmp_path / "gepa.html")
    diff = "document.querySelector('pre.diff').innerText"
    text, diff_text, svg_text = _visit(
        browser, page, [TEXT, diff, "document.querySelector('figure.chart svg').textContent"], tmp_path / "gepa.png"
    )
    m = meta(gepa_run)
    assert (
        f"{m.get('best_val_score', m.get('best_score')):.3f} (candidate {m['best_idx']} of {m['num_candidates']})"
        in text
    )
    assert f"{m['total_metric_calls']} / {m['budget'] if 'budget' in m else m['config']['max_calls']}" in text
    assert "+Answer the question. Use KEYWORD." in diff_text and "-Answer the question." in diff_text
    assert "Frontier mean" in text and "metric calls" in svg_text


@pytest.mark.slow
def test_rl_page_in_chromium(browser, rl_run, tmp_path):
    page = write_report([rl_run], tmp_path / "rl.html")
    pick_step = (
        "(() => { const s = document.getElementById('f-step'); s.value = '2'; s.dispatchEvent(new Event('change'));"
        " return document.getElementById('page-info').textContent; })()"
    )
    text, steps_table, info = _visit(browser, page, [TEXT, "document.getElementById('steps-0').innerText", pick_step],
                                     tmp_path / "rl.png")
    metrics = [json.loads(line) for line in (rl_run / "metrics.jsonl").read_text().splitlines()]
    trained = [m for m in metrics if "loss" in m]
    for m in trained:
        assert f"{m['reward_mean']:.4f}" in steps_table and _num(m["loss"], 5) in steps_table
    for m in metrics:
        if "eval_reward" in m:
            assert f"{m['eval_reward']:.3f}" in text
    assert "Baseline checks" in text and "Step time split" in text and "KL" in text
    per_step = len((rl_run / "rollouts" / "step_2.jsonl").read_text().splitlines())
    assert info.startswith(f"{per_step} of ")


def test_report_scrubs_credentials_echoed_in_errors(tmp_path):
    """Our runner scrubs errors when it writes them; the report scrubs them again, for rows written by
    another tool (verifiers' ``{"error", "message"}`` shape included) or an older version."""
    from support.scripted_client import ScriptedClient

    from evalkit.core.errors import ModelCallError
    from evalkit.eval.config import EvalConfig
    from evalkit.eval.runner import run_eval
    from evalkit.report.eval_data import error_kind_and_message

    secret = "sk-live-0123456789abcdefghij"
    echoed = f"HTTP 401: echoed Authorization: Bearer {secret}"
    client = ScriptedClient(lambda m, s, t: ModelCallError(echoed))
    config = EvalConfig(
        env_id="toy-tools",
        model="leaky",
        output_dir=str(tmp_path),
        num_examples=2,
        rollouts_per_example=1,
        max_retries=0,
    )
    run_dir = run_eval(config, client=client, env=report_runs.tool_env()).run_dir
    html = write_report([run_dir]).read_text()
    assert "HTTP 401: echoed Authorization" in html and secret not in html
    for raw in (f"model call failed: {echoed}", {"error": "AuthenticationError", "message": echoed}):
        kind, message = error_kind_and_message({"error": raw, "error_kind": "model"})
        assert secret not in message and "echoed Authorization" in message and kind in ("model", "AuthenticationError")
