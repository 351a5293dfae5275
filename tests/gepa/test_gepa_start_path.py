"""What a run does before its first rollout, and only once: the teacher's route (the routing rule reads the
endpoints file, and may look for a local model) is found once, for both the teacher's default reply length and
whether its block is opened for it; a client with nothing to preflight (a scripted model, an in-process engine)
costs no trip through the event loop. Both were measured on the start of ``bench/gepa_gain.py``'s runs."""

from __future__ import annotations

from support.gepa_job import config, run, teacher  # noqa: E402
from support.scripted_client import ScriptedClient

import evalkit.clients.routing as routing
from evalkit.core.aio import LoopThread


def _count_routes(monkeypatch, model: str) -> list[str]:
    seen: list[str] = []
    real = routing.route

    def counted(spec):
        if spec.model == model:
            seen.append(spec.model)
        return real(spec)

    monkeypatch.setattr(routing, "route", counted)
    return seen


def test_the_teacher_is_routed_once_and_its_defaults_still_follow_the_route(tmp_path, monkeypatch):
    routes = _count_routes(monkeypatch, "scripted")
    outcome, _, teach = run(config(tmp_path, max_calls=40, reflection_sampling=None))
    assert outcome.num_reflection_calls >= 1
    assert len(routes) == 1  # the code before routed it twice (the default max_tokens, the opened block)
    assert teach.requests[0]["sampling"].max_tokens == 1024  # a server's teacher: the longer default

    routes = _count_routes(monkeypatch, "local/smollm2-135m")
    embedded = ScriptedClient(teacher, model="local/smollm2-135m")
    run(config(tmp_path, max_calls=40, model="local/smollm2-135m", reflection_sampling=None,
               run_dir=str(tmp_path / "run2")), teach=embedded)
    assert len(routes) == 1
    assert embedded.requests[0]["sampling"].max_tokens == 256  # an embedded teacher: the shorter default


def test_clients_without_a_preflight_cost_no_event_loop_trip_before_the_first_rollout(tmp_path, monkeypatch):
    trips: list[int] = []
    real = LoopThread.run

    def counted(self, coro):
        trips.append(1)
        return real(self, coro)

    monkeypatch.setattr(LoopThread, "run", counted)
    at_first: list[int] = []

    def task(messages, sampling, tools):
        if not at_first:
            at_first.append(len(trips))
        return "dunno"

    run(config(tmp_path, max_calls=40), task=ScriptedClient(task))
    assert at_first == [1]  # the seed's validation itself (the code before made one trip per client first: 3)
