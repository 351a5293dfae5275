"""budget.json is written a few times a run (a reservation of several iterations), not before every evaluation,
and what is on disk always covers what the run has started: a kill at any point leaves a count a resume cannot
overspend from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.gepa_job import config, make_env, task_model  # noqa: E402
from support.scripted_client import ScriptedClient

import gepa_cli.budget as budget_module
from evalkit.core.errors import UserError
from gepa_cli.budget import RolloutBudget, saved_usage
from gepa_cli.runner import run_gepa


def test_one_write_per_iteration_and_disk_covers_every_reservation(tmp_path, monkeypatch):
    writes: list[dict] = []
    reserves: list[tuple[int, int]] = []  # (in memory, on disk) right after each reservation returned
    real_write, real_reserve = budget_module.write_record, RolloutBudget.reserve

    def write(path: Path, record: bytes, **kwargs) -> None:
        writes.append(json.loads(record))
        real_write(path, record, **kwargs)

    def reserve(self: RolloutBudget, n: int) -> None:
        real_reserve(self, n)
        reserves.append((self.used, saved_usage(self.path)[0]))

    monkeypatch.setattr(budget_module, "write_record", write)
    monkeypatch.setattr(RolloutBudget, "reserve", reserve)
    useless = ScriptedClient(lambda m, s, t: "```\nSomething else.\n```", model="teacher")
    outcome = run_gepa(config(tmp_path, max_calls=60), clients=(ScriptedClient(task_model), useless), envs=[make_env()],
                       show_progress=False)

    assert outcome.status == "budget_exhausted" and outcome.total_metric_calls <= 60
    # every rollout started was on disk before it ran (a kill counts it)
    assert reserves and all(on_disk >= in_memory for in_memory, on_disk in reserves)
    # each iteration evaluates twice (parent and child minibatch) and reflects once (the teacher never helps, so
    # no minibatch is aced), yet writes once: at its end; plus the seed pass's write and the final one
    iterations = outcome.num_reflection_calls
    assert len(reserves) >= 2 * iterations
    assert len(writes) <= iterations + 2
    # the last write is exact: nothing reserved past what was spent, and the reflection calls are all counted
    assert writes[-1]["used"] == writes[-1]["reserved"] == outcome.total_metric_calls
    assert writes[-1]["reflection_calls"] == outcome.num_reflection_calls > 0
    assert saved_usage(tmp_path / "run" / "budget.json") == (outcome.total_metric_calls, outcome.num_reflection_calls)


def test_a_killed_runs_reservation_counts_as_spent(tmp_path):
    path = tmp_path / "budget.json"
    budget = RolloutBudget(60, path, chunk=12, ahead=2)
    budget.reserve(6)  # the seed pass: reserves past it, two iterations more
    assert json.loads(path.read_text()) == {"max_calls": 60, "used": 6, "reserved": 30, "reflection_calls": 0}
    budget.reserve(3)
    budget.reserve(3)  # within the reservation: nothing written
    budget.checkpoint()  # an iteration's end with one more iteration's worth left: nothing written either
    assert json.loads(path.read_text())["used"] == 6
    # the process dies here: a resume counts the whole reservation, more than the 12 it had started
    assert RolloutBudget(60, path).used == 30
    budget.reserve(7)
    budget.checkpoint()  # 11 left, less than an iteration: extended before the next one starts
    assert RolloutBudget(60, path).used == 43 == budget.reserved and budget.used == 19
    budget.reserve(25)  # past the reservation: written before it runs, capped by the budget
    assert RolloutBudget(60, path).used == 60 == budget.reserved and budget.used == 44
    budget.reserve(12)
    budget.checkpoint()  # the budget cannot pay for another iteration (the stopper ends the run): nothing written
    assert json.loads(path.read_text())["used"] == 44
    budget.settle()
    assert RolloutBudget(60, path).used == 56


def test_the_record_is_rewritten_in_place_and_a_torn_one_is_refused(tmp_path):
    path = tmp_path / "budget.json"
    path.write_text(json.dumps({"max_calls": 60, "used": 12, "reflection_calls": 2}, indent=2) + "\n" + " " * 300)
    budget = RolloutBudget(60, path, chunk=5, ahead=1)  # an older primekit's file (another size) still reads
    assert (budget.used, budget.reflection_calls) == (12, 2)
    budget.reserve(1)
    inode = path.stat().st_ino
    budget.reserve(10)
    assert path.stat().st_ino == inode and path.stat().st_size == budget_module.RECORD_BYTES  # no new file
    assert saved_usage(path) == (28, 2)
    # a power loss tore the record: the count is unknown, so a resume stops rather than guess low
    path.write_bytes(path.read_bytes()[:20] + b"\0" * (budget_module.RECORD_BYTES - 20))
    with pytest.raises(UserError, match="budget.json is damaged .* the rollouts this run spent are unknown"):
        RolloutBudget(60, path)
