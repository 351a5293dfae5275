"""The candidate lineage in `prime eval view` (text) and its HTML report: parents to children, merges,
scores, and what ended the run, checked against the run's own results.jsonl."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from support.gepa_job import config, read_jsonl, run
from support.gepa_tools import SEED_PROMPT, component_teacher, exact, lookup, merge_task
from support.scripted_client import ScriptedClient
from typer.testing import CliRunner

from evalkit.envs import Rubric, ToolEnv
from evalkit.report.gepa_data import load_gepa_run
from evalkit.report.lineage import lineage_svg, tree_lines
from primekit_cli.app import app


def merged_run(tmp_path):
    rows = [{"question": f"q{i}", "answer": f"a{i}"} for i in range(80)]
    env = ToolEnv(dataset=rows[:40], eval_dataset=rows[40:], system_prompt=SEED_PROMPT, rubric=Rubric([exact]),
                  tools=[lookup], max_turns=3)
    cfg = config(tmp_path, max_calls=120, num_val=8, components=["system_prompt", "tools"], use_merge=True,
                 acceptance_criterion="improvement_or_equal", seed=1, no_improvement_stop=6)
    run(cfg, env=env, task=ScriptedClient(merge_task), teach=ScriptedClient(component_teacher, model="teacher"))
    return tmp_path / "run"


def test_lineage_text_and_svg_follow_the_parents(tmp_path):
    run_dir = merged_run(tmp_path)
    rows = read_jsonl(run_dir / "results.jsonl")
    meta = json.loads((run_dir / "metadata.json").read_text())
    parents = {r["example_id"]: r["info"]["parent_candidate_idxs"] for r in rows}
    assert any(len(p) == 2 for p in parents.values())

    view = CliRunner().invoke(app, ["eval", "view", str(run_dir)])
    assert view.exit_code == 0, view.output
    text = view.output[view.output.index("Lineage"):]
    lines = tree_lines(load_gepa_run(run_dir))
    assert lines[-1] == f"ended by: {meta['stopped_by']}" and f"ended by: {meta['stopped_by']}" in text
    shown = {int(m.group(1)): line for line in lines if (m := re.search(r"#(\d+) ", line))}
    assert sorted(shown) == sorted(parents)
    for idx, line in shown.items():
        indent = len(line) - len(line.lstrip())
        if parents[idx]:  # a child sits one level deeper than its deepest parent
            deepest = max(len(shown[p]) - len(shown[p].lstrip()) for p in parents[idx])
            assert indent == deepest + 2
        if len(parents[idx]) == 2:
            assert f"merge of #{parents[idx][0]} + #{parents[idx][1]}" in line
        score = next(r["score"] for r in rows if r["example_id"] == idx)
        assert f"#{idx} {score:.3f}" in line

    svg = lineage_svg(load_gepa_run(run_dir))
    tree = ET.fromstring(svg)  # well-formed, so the report can inline it
    ns = "{http://www.w3.org/2000/svg}"
    nodes = tree.findall(f"{ns}g")
    assert len(nodes) == len(rows)
    edges = tree.findall(f"{ns}path")
    assert len(edges) == sum(len(p) for p in parents.values())
    assert sum(1 for e in edges if e.get("stroke-dasharray")) == 2 * sum(len(p) == 2 for p in parents.values())

    html = CliRunner().invoke(app, ["eval", "view", str(run_dir), "--html", str(tmp_path / "r.html")])
    assert html.exit_code == 0, html.output
    page = (tmp_path / "r.html").read_text()
    assert 'id="lineage-0"' in page and f'id="ended-by-0">{meta["stopped_by"]}<' in page
    assert page.count('class="node"') == len(rows)
