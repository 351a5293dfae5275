"""GEPA on the real embedded model (task and teacher), with a tiny budget: the files and the budget hold."""

from __future__ import annotations

import json

import pytest

from gepa_cli.config import build_job_config
from gepa_cli.runner import run_gepa


@pytest.mark.slow
def test_embedded_model_tiny_budget(tmp_path):
    pytest.importorskip("evalkit.clients.local", reason="the embedded engine's client has not landed")
    config = build_job_config(
        {
            "envs": [{"id": "arithmetic"}],
            "max_calls": 24,
            "num_train": 6,
            "num_val": 4,
            "sampling": {"max_tokens": 16},
            "reflection_sampling": {"max_tokens": 96},
            "run_dir": str(tmp_path / "run"),
        },
        "test",
    )
    outcome = run_gepa(config, show_progress=False)
    run_dir = tmp_path / "run"
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert outcome.status == "budget_exhausted"
    assert meta["total_metric_calls"] == outcome.total_metric_calls <= 24
    assert meta["num_reflection_calls"] >= 1
    assert (run_dir / "system_prompt.txt").read_text() == json.loads(
        (run_dir / "results.jsonl").read_text().splitlines()[meta["best_idx"]]
    )["info"]["system_prompt"]
    assert len((run_dir / "pareto_frontier.jsonl").read_text().splitlines()) == 4
