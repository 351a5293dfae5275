"""Overlapped RL on CPU: while a training step runs, the engine has its share of torch's intra-op threads
and the trainer half the cores or all of them (whichever gave shorter step cycles); nobody is reniced;
outside training steps the engine has every core."""

from __future__ import annotations

import os
import threading

import pytest
import torch
from support.report_runs import RL_ENV as ENV_CODE  # rewards the digits in a reply
from support.tiny_model import build_tokenizer, write_tiny_model
from typer.testing import CliRunner

from evalkit.core.types import SamplingArgs
from evalkit.model.threads import ThreadTuner
from rl_backend import cpu_share
from rl_backend.cpu_share import CpuShare, split


@pytest.mark.parametrize(("cores", "expected"), [(1, (1, 1)), (2, (1, 1)), (3, (1, 2)), (16, (8, 8))])
def test_split_gives_each_side_its_own_cores(cores, expected):
    assert split(cores) == expected


def test_a_capped_tuner_climbs_no_higher_and_the_cap_lifted_restores_its_choice():
    before = torch.get_num_threads()
    try:
        tuner = ThreadTuner(4)
        assert tuner.choices == [1, 2, 4] and tuner.best == 4
        tuner.limit(2)
        assert (tuner.top, tuner.choices, tuner.best, torch.get_num_threads()) == (2, [1, 2], 2, 2)
        for _ in range(200):  # probes stay on the capped ladder
            assert tuner.before_step() <= 2
            tuner.after_step(8, 0.01)
        tuner.limit(None)
        assert (tuner.top, tuner.choices, tuner.best) == (4, [1, 2, 4], 4)
        fixed = ThreadTuner(3, adaptive=False)
        fixed.limit(1)
        assert fixed.choices == [1] and fixed.current == 1
        fixed.limit(None)
        assert fixed.choices == [3] and fixed.current == 3
    finally:
        torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny_engine(tmp_path_factory):
    from transformers import AutoModelForCausalLM

    from evalkit.model.engine import Engine

    folder = write_tiny_model(tmp_path_factory.mktemp("tiny") / "model")
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    engine = Engine(model, build_tokenizer(), dtype="fp32", max_batch=4, device="cpu", threads=4)
    yield engine
    engine.close()


def test_training_splits_the_threads_and_gives_them_back(tiny_engine):
    share = CpuShare(tiny_engine, overlap=True, cores=4, cuda=False)
    outside = torch.get_num_threads()
    with share.training():
        assert torch.get_num_threads() == 2 and tiny_engine.thread_cap == 2
        tiny_engine.generate_many([[5, 6, 7]], SamplingArgs(max_tokens=3))
        assert tiny_engine._tuner.top == 2 and tiny_engine._tuner.current <= 2  # the worker applied the cap
    assert torch.get_num_threads() == outside and tiny_engine.thread_cap is None
    tiny_engine.generate_many([[5, 6, 7]], SamplingArgs(max_tokens=3))
    assert tiny_engine._tuner.top == 4  # every core again between training steps


def test_each_step_runs_the_way_that_gave_the_shortest_step_cycles(tiny_engine):
    now, drains = [0.0], []
    cost = {"half": 30.0, "all": 20.0, "serial": 25.0}

    def drain():
        drains.append(now[0])
        now[0] += 4.0  # waiting for the sampler counts in the serial step's cycle

    share = CpuShare(tiny_engine, overlap=True, cores=4, cuda=False, clock=lambda: now[0], drain=drain)
    assert share.choices == ["half", "all", "serial"]
    seen = []
    for _ in range(17):
        with share.training():
            choice = share._last[0]
            seen.append((choice, torch.get_num_threads(), tiny_engine.thread_cap, share.drained_s))
        now[0] += cost[choice] - (4.0 if choice == "serial" else 0.0)
    assert seen[:3] == [("half", 2, 2, 0.0), ("all", 4, 2, 0.0), ("serial", 4, None, 4.0)]
    assert [c for c, *_ in seen[3:7]] == ["all"] * 4
    assert seen[7][0] == "half" and seen[15][0] == "serial"  # the others, in turn, every 8 steps
    assert [c for c, *_ in seen[8:15]] == ["all"] * 7 and seen[16][0] == "all"
    assert len(drains) == 2 and share.cycle == {"half": 30.0, "all": 20.0, "serial": 25.0}
    assert CpuShare(tiny_engine, overlap=True, cores=1, cuda=False).choices == ["all"]


@pytest.mark.parametrize(
    ("overlap", "cuda", "engine"), [(False, False, True), (True, True, True), (True, False, False)]
)
def test_nothing_is_split_on_policy_on_cuda_or_without_an_engine(tiny_engine, overlap, cuda, engine):
    share = CpuShare(tiny_engine if engine else None, overlap=overlap, cores=4, cuda=cuda)
    outside = torch.get_num_threads()
    with share.training():
        assert torch.get_num_threads() == outside and tiny_engine.thread_cap is None


@pytest.mark.slow
@pytest.mark.parametrize("async_level", [1, 0])
def test_overlapped_training_steps_run_on_their_share_at_normal_priority(tmp_path, monkeypatch, async_level):
    """The trainer thread trains with half the (here: 4) cores, then all, then all after waiting for
    the sampler, while overlapping; all of them on-policy; and is never reniced (the old rule, nice 19, starved it
    whenever another process wanted the CPU)."""
    from primekit_cli.app import app
    from rl_backend.policy import Policy

    model = write_tiny_model(tmp_path / "model")
    env_dir = tmp_path / "environments" / "digits"
    env_dir.mkdir(parents=True)
    (env_dir / "digits.py").write_text(ENV_CODE)
    config = tmp_path / "rl.toml"
    config.write_text(
        f'model = "{model}"\nrun_name = "t"\nmax_steps = 3\nbatch_size = 4\nrollouts_per_example = 2\n'
        f'[sampling]\nmax_tokens = 8\n[[env]]\nid = "{env_dir}"\n'
        f"[trainer]\nlr = 1e-3\nmicro_batch_size = 2\nasync_level = {async_level}\n"
        "[ckpt]\ninterval = 0\nsave_weights = false\n[eval]\ninterval = 0\n[baseline]\nenabled = false\n"
    )
    monkeypatch.setattr(cpu_share.os, "cpu_count", lambda: 4)
    seen: list[tuple[int, int]] = []
    original = Policy.train_step

    def recording(self, samples, step):
        seen.append((torch.get_num_threads(), os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
        return original(self, samples, step)

    monkeypatch.setattr(Policy, "train_step", recording)
    nice = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    outside = torch.get_num_threads()
    result = CliRunner().invoke(app, ["rl", "run", str(config), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    if async_level and not torch.cuda.is_available():  # half the cores, then all, then the faster of the two
        assert [t for t, _ in seen] == [2, 4, 4]  # half, all, serial (each tried once first)
    else:
        assert [t for t, _ in seen] == [outside] * 3
    assert [n for _, n in seen] == [nice] * 3
    assert torch.get_num_threads() == outside
