"""Paired statistics (evalkit/report/paired.py) against independent computations on random data: the sign
test against the exact binomial distribution (scipy's two-sided rule, computed with math.comb; scipy itself
when installed), pass@k against enumerating every k-subset, the bootstrap against the normal interval and
its coverage; and the pairing rules (unpaired runs are said to be unpaired)."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

from evalkit.report.paired import bootstrap_mean, compare, pass_at_k, sign_test, summary_line


def binomial_two_sided(successes: int, n: int) -> float:
    """scipy.stats.binomtest(successes, n, 0.5).pvalue: the outcomes no likelier than the one seen."""
    pmf = [math.comb(n, k) / 2**n for k in range(n + 1)]
    seen = pmf[successes]
    return min(1.0, sum(p for p in pmf if p <= seen * (1 + 1e-7)))


def test_sign_test_matches_the_exact_binomial():
    rng = random.Random(1)
    for _ in range(300):
        better, worse = rng.randint(0, 40), rng.randint(0, 40)
        if better + worse == 0:
            continue
        assert sign_test(better, worse) == pytest.approx(binomial_two_sided(better, better + worse), rel=1e-9)
    assert sign_test(0, 0) == 1.0


def test_sign_test_matches_scipy_when_installed():
    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(2)
    for _ in range(100):
        better, worse = rng.randint(0, 30), rng.randint(1, 30)
        assert sign_test(better, worse) == pytest.approx(stats.binomtest(better, better + worse, 0.5).pvalue, rel=1e-9)


def test_pass_at_k_matches_enumerating_subsets():
    for n in range(1, 8):
        for c in range(n + 1):
            outcomes = [True] * c + [False] * (n - c)
            for k in range(1, n + 1):
                subsets = list(itertools.combinations(outcomes, k))
                assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))


def test_bootstrap_interval_is_close_to_the_normal_one_for_many_examples():
    data = np.random.default_rng(3).normal(0.1, 1.0, size=400)
    interval = bootstrap_mean(data)
    half = 1.959964 * data.std(ddof=1) / math.sqrt(len(data))
    assert interval.estimate == pytest.approx(data.mean())
    assert interval.low == pytest.approx(data.mean() - half, abs=0.02)
    assert interval.high == pytest.approx(data.mean() + half, abs=0.02)


def test_bootstrap_interval_covers_the_true_mean_about_95_percent_of_the_time():
    rng = np.random.default_rng(4)
    hits = 0
    trials = 200
    for i in range(trials):
        diffs = rng.binomial(1, 0.3, size=60) - rng.binomial(1, 0.2, size=60)  # true mean difference 0.1
        interval = bootstrap_mean(diffs, samples=500, seed=i)
        hits += interval.low <= 0.1 <= interval.high
    assert 0.88 <= hits / trials <= 0.99


def rows(rewards: dict[int, list[float]], question: str = "q{}") -> list[dict]:
    return [{"example_id": eid, "rollout_idx": i, "reward": r, "error": None,
             "prompt": [{"role": "system", "content": "any"}, {"role": "user", "content": question.format(eid)}]}
            for eid, rs in rewards.items() for i, r in enumerate(rs)]


def test_compare_counts_flips_and_direction():
    a = rows({0: [0, 0], 1: [1, 0], 2: [1, 1], 3: [0.5, 0.5]})
    b = rows({0: [1, 0], 1: [0, 0], 2: [1, 1], 3: [0.5, 0.5]})
    result = compare(a, b)
    assert result.paired and result.examples == 4
    assert (result.better, result.worse, result.same) == (1, 1, 2)
    assert result.difference.estimate == pytest.approx(0.0)
    assert {(f.example_id, f.solved_by) for f in result.flips} == {(0, "B"), (1, "A")}
    assert set(result.pass_at_k) == {1, 2}
    assert result.sign_p == 1.0
    assert "too few paired examples for a verdict" in summary_line(result)  # 4 < MIN_PAIRED_EXAMPLES


def test_identical_runs_have_a_zero_width_interval():
    a = rows({i: [random.Random(i).random() for _ in range(3)] for i in range(10)})
    result = compare(a, a)
    assert (result.difference.low, result.difference.high) == (0.0, 0.0) and not result.flips


def test_different_questions_are_unpaired():
    result = compare(rows({0: [1], 1: [0]}), rows({0: [1], 1: [1]}, question="other {}"))
    assert not result.paired and "unpaired" in result.reason
    assert "unpaired" in summary_line(result)


def test_disjoint_examples_are_unpaired_and_partial_overlap_is_said():
    assert not compare(rows({0: [1]}), rows({5: [1]})).paired
    partial = compare(rows({0: [0], 1: [0], 2: [1]}), rows({1: [1], 2: [1], 3: [0]}))
    assert partial.paired and partial.examples == 2 and (partial.only_a, partial.only_b) == (1, 1)
    assert "1 only in A, 1 only in B, left out" in summary_line(partial)


def test_task_ids_pair_by_the_tasks_own_id_and_index_ids_still_do():
    """verifiers writes a task's own id (text) where a task payload carries one: such runs pair by it, an old
    run's ints still pair with ints, and both kinds in one comparison never compare an int with a string."""
    a = rows({"train-00003": [0, 0], "train-00010": [1, 1], 7: [0]})
    b = rows({"train-00010": [1, 0], "train-00003": [1, 1], 7: [1]})
    result = compare(a, b)
    assert result.paired and result.examples == 3 and (result.better, result.worse) == (2, 1)
    assert {(f.example_id, f.solved_by) for f in result.flips} == {("train-00003", "B"), (7, "B")}
    assert compare(rows({0: [1], 1: [0]}), rows({0: [1], 1: [1]})).examples == 2
    assert not compare(rows({0: [1]}), rows({"0": [1]})).paired  # an index is not the text of a task id


def test_a_real_improvement_is_called_real():
    gen = random.Random(5)
    a = rows({i: [float(gen.random() < 0.2) for _ in range(4)] for i in range(80)})
    b = rows({i: [float(gen.random() < 0.7) for _ in range(4)] for i in range(80)})
    result = compare(a, b)
    assert result.difference.low > 0 and result.sign_p < 1e-6 and result.pass_at_k[1].low > 0
    assert "a real difference" in summary_line(result)


def test_bootstrap_matches_a_plain_numpy_reference_and_handles_big_runs():
    data = np.random.default_rng(6).random(50)
    rng = np.random.default_rng(0)  # the module's fixed seed; one resample at a time, the obvious way
    reference = [data[rng.integers(0, 50, size=50)].mean() for _ in range(2000)]
    interval = bootstrap_mean(data)
    assert (interval.low, interval.high) == pytest.approx(tuple(np.percentile(reference, [2.5, 97.5])), abs=0.01)
    big = bootstrap_mean(np.random.default_rng(7).random(100_000), samples=200)  # chunked: no 200 x 100,000 matrix
    assert big.low < big.estimate < big.high
