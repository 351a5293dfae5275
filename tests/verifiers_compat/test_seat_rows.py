"""A multi-seat episode's rows (verifiers v1 multi-agent envs): one row per seat, read back, summarized."""

from __future__ import annotations

from evalkit.core.runs import RESULTS
from evalkit.core.types import RolloutState
from evalkit.eval.results import read_rows
from evalkit.eval.summary import summarize


def _seat(agent: str, trainable: bool, reward: float) -> RolloutState:
    seat = RolloutState(example_id=3, rollout_idx=1, prompt=[{"role": "user", "content": agent}], reward=reward)
    seat.columns = {"episode_id": "e1", "agent": agent, "trainable": trainable}
    return seat


def test_an_episode_writes_its_seats_rows_and_hands_them_its_failure():
    episode = RolloutState(example_id=3, rollout_idx=1, prompt=[])
    episode.seats = [_seat("solver", True, 1.0), _seat("judge", False, 0.0)]
    episode.timing = {"generation_ms": 5.0, "scoring_ms": 0.0, "total_ms": 5.0}
    rows = [s.to_row() for s in episode.row_states()]
    assert [(r["agent"], r["trainable"], r["episode_id"], r["reward"]) for r in rows] == [
        ("solver", True, "e1", 1.0), ("judge", False, "e1", 0.0)]
    assert rows[0]["timing"]["total_ms"] == 5.0
    episode.record_error("timeout", "rollout timed out")
    assert [s.error_kind for s in episode.row_states()] == ["timeout", "timeout"]
    plain = RolloutState(example_id=0, rollout_idx=0, prompt=[])
    assert plain.row_states() == [plain] and "agent" not in plain.to_row()


def test_seat_rows_read_back_whole_and_the_reward_is_the_trained_seats(tmp_path):
    import json

    rows = [_seat(agent, trainable, reward).to_row()
            for agent, trainable, reward in (("solver", True, 1.0), ("judge", False, 0.0))]
    (tmp_path / RESULTS).write_text("".join(json.dumps(r) + "\n" for r in rows))
    back = read_rows(tmp_path)
    assert [r["agent"] for r in back] == ["solver", "judge"]  # one (example, rollout) key, two seats
    summary = summarize(back, rollouts_per_example=2)
    assert summary["avg_reward"] == 1.0 and summary["num_rollouts"] == 2  # verifiers' headline: trained seats
    untrained = summarize([{**r, "trainable": False} for r in back], rollouts_per_example=2)
    assert untrained["avg_reward"] == 0.5  # no seat trains: every row
