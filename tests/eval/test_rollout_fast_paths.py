"""The harness's fast paths keep their contracts: plain rows equal what ``datasets`` returns, the FIFO bound
hands slots in order and gets them back from cancelled waiters, fast reward functions run inline with the
same scores and errors, and the collector settings come back after a batch of rollouts."""

from __future__ import annotations

import asyncio
import gc

import pytest

from evalkit.core.aio import Slots
from evalkit.core.gctune import RUN_THRESHOLDS, relaxed_gc
from evalkit.core.types import RolloutState
from evalkit.envs import Rubric, SingleTurnEnv, fast_reward
from evalkit.envs.rows import plain_rows, take_rows

UNIFORM = [
    {"question": f"q{i}", "answer": str(i), "info": {"text": f"t{i}", "n": i, "tags": ["a", "b"][: i % 3]}}
    for i in range(23)
]


def test_uniform_rows_stay_plain_and_match_datasets_with_shuffle():
    from datasets import Dataset

    assert plain_rows(UNIFORM) is not None
    dataset = Dataset.from_list(UNIFORM)
    for n, shuffle in ((-1, False), (5, False), (-1, True), (7, True)):
        want = dataset.shuffle(seed=11) if shuffle else dataset
        want = want.select(range(len(UNIFORM) if n < 0 else n)).to_list()
        assert take_rows(UNIFORM, n, 11, shuffle) == want


@pytest.mark.parametrize("rows", [
    [{"question": "a", "x": 1}, {"question": "b", "x": 1.5}],      # int then float: datasets widens
    [{"question": "a", "x": 1}, {"x": 2, "question": "b"}],        # key order differs
    [{"question": "a", "info": {"k": 1}}, {"question": "b", "info": {"j": 1}}],  # nested keys differ
    [{"question": "a", "x": (1, 2)}],                               # a tuple comes back a list
    [{"question": "a", "x": 2**70}],                                # too big for int64
    [],
])
def test_rows_datasets_would_change_are_not_kept_plain(rows):
    assert plain_rows(rows) is None


def test_environment_reads_plain_rows_without_changing_them():
    env = SingleTurnEnv(eval_dataset=UNIFORM, rubric=Rubric())
    rows = env.get_eval_dataset(n=3)
    rows[0]["info"]["text"] = "changed"  # a caller's copy
    assert env.get_eval_dataset(n=1)[0]["info"]["text"] == "t0"
    assert env.eval_dataset.to_list() == UNIFORM  # the property is still a datasets.Dataset


async def test_slots_are_handed_in_order_and_back_from_cancelled_waiters():
    slots = Slots(1)
    order: list[int] = []
    await slots.acquire()
    waiters = [asyncio.create_task(_take(slots, i, order)) for i in range(4)]
    await asyncio.sleep(0)
    waiters[1].cancel()
    slots.release()
    await asyncio.gather(*waiters, return_exceptions=True)
    assert order == [0, 2, 3]
    assert not slots.locked()


async def test_a_waiter_cancelled_after_it_was_handed_a_slot_gives_it_back():
    slots = Slots(1)
    await slots.acquire()
    waiter = asyncio.create_task(slots.acquire())
    await asyncio.sleep(0)
    slots.release()  # handed to the waiter, which has not resumed yet
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    assert not slots.locked()


async def _take(slots: Slots, i: int, order: list[int]) -> None:
    async with slots:
        order.append(i)
        await asyncio.sleep(0)


async def test_fast_reward_functions_score_inline_like_threaded_ones():
    def exact(completion, answer):
        return float(completion[-1]["content"] == answer)

    def broken(completion):
        raise ValueError("bad")

    state = RolloutState(example_id=0, rollout_idx=0, prompt=[], answer="x",
                         completion=[{"role": "assistant", "content": "x"}])
    threaded = await Rubric([exact, broken], [1.0, 0.5]).score(state, timeout=5)
    exact_fast, broken_fast = fast_reward(exact), fast_reward(broken)
    inline = await Rubric([exact_fast, broken_fast], [1.0, 0.5]).score(state, timeout=5)
    assert (inline.reward, inline.metrics, inline.errors) == (threaded.reward, threaded.metrics, threaded.errors)
    assert inline.errors == ["reward function broken raised ValueError: bad"]


async def test_a_fast_reward_function_that_returns_an_awaitable_is_an_error():
    async def later():
        return 1.0

    @fast_reward
    def wrong(completion):
        return later()

    state = RolloutState(example_id=0, rollout_idx=0, prompt=[], completion=[])
    score = await Rubric([wrong]).score(state, timeout=5)
    assert score.reward == 0.0 and "make it async" in score.errors[0]


def test_relaxed_gc_restores_the_thresholds_after_nested_batches():
    before = gc.get_threshold()
    with relaxed_gc():
        with relaxed_gc():
            assert gc.get_threshold() == RUN_THRESHOLDS
        assert gc.get_threshold() == RUN_THRESHOLDS
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_a_native_eval_loads_without_datasets_or_pandas():
    """Start-up: resolving a built-in environment and reading its rows imports neither (a legacy verifiers
    environment still does, through verifiers)."""
    import subprocess
    import sys

    code = (
        "import sys; from evalkit.eval.runner import arun_eval; from evalkit.loading.resolve import load_environment; "
        "env = load_environment('reverse-text', {}); rows = env.get_eval_dataset(n=3, shuffle=True); "
        "print(sorted(m for m in ('datasets', 'pandas', 'pyarrow', 'torch') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


async def test_a_cancelled_waiter_left_in_the_queue_does_not_block_a_free_slot():
    slots = Slots(1)
    await slots.acquire()
    waiter = asyncio.create_task(slots.acquire())
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    slots.release()
    await asyncio.wait_for(slots.acquire(), 5)
    assert slots.locked()


class _CountingClient:
    """Replies after a short sleep and records the most requests it held at once."""

    model = "counting"

    def __init__(self):
        self.now = self.peak = 0

    async def chat(self, messages, sampling, tools=None):  # noqa: ANN001, ANN201
        from evalkit.core.types import Completion

        self.now += 1
        self.peak = max(self.peak, self.now)
        await asyncio.sleep(0.001)
        self.now -= 1
        return Completion(text="x")


async def test_run_groups_keeps_the_bound_and_returns_groups_in_input_order():
    from evalkit.eval.rollouts import run_groups

    env = SingleTurnEnv(eval_dataset=UNIFORM, rubric=Rubric())
    client = _CountingClient()
    rows = env.get_eval_dataset()
    seen: list[int] = []
    groups = await run_groups(env, client, rows, rollouts_per_example=3, max_concurrent=5,
                              on_group=lambda states: seen.append(states[0].example_id))
    assert client.peak == 5
    assert [[(s.example_id, s.rollout_idx) for s in g] for g in groups] == [
        [(i, 0), (i, 1), (i, 2)] for i in range(len(rows))
    ]
    assert sorted(seen) == list(range(len(rows)))


async def test_an_on_group_failure_stops_the_run_and_starts_nothing_more():
    from evalkit.eval.rollouts import run_groups

    env = SingleTurnEnv(eval_dataset=UNIFORM, rubric=Rubric())
    client = _CountingClient()
    calls: list[int] = []

    def on_group(states):  # noqa: ANN001, ANN202
        calls.append(states[0].example_id)
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        await run_groups(env, client, env.get_eval_dataset(), rollouts_per_example=2, max_concurrent=2,
                         on_group=on_group)
    assert len(calls) == 1
    assert client.now == 0  # nothing left running
