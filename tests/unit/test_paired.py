"""The paired 95 % interval of an accuracy difference, against numbers worked out by hand."""

from __future__ import annotations

import math

import pytest
from orchestra_ops.evals.opencompass.paired import Z95, naive_mean, paired, weighted_bootstrap


def test_paired_difference_and_interval() -> None:
    # 10 samples: 2 where only the other model is right, 1 where only the baseline is, 7 alike
    pairs = [(False, True)] * 2 + [(True, False)] + [(True, True)] * 4 + [(False, False)] * 3
    diffs = [100.0] * 2 + [-100.0] + [0.0] * 7
    mean = sum(diffs) / 10
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / 9)
    result = paired(pairs)
    assert result is not None and result.n == 10
    assert result.diff == pytest.approx(10.0)
    assert result.low == pytest.approx(mean - Z95 * sd / math.sqrt(10))
    assert result.high == pytest.approx(mean + Z95 * sd / math.sqrt(10))
    assert result.to_json() == {"difference": 10.0, "ci95": [round(result.low, 4), round(result.high, 4)], "n": 10}


def test_no_samples_or_one_sample() -> None:
    assert paired([]) is None
    one = paired([(False, True)])
    assert one is not None and (one.diff, one.low, one.high) == (100.0, None, None)


def test_naive_mean_of_subsets() -> None:
    a = [(False, True), (True, True)]  # diffs 100, 0: mean 50, var 5000
    b = [(True, False), (True, False), (False, False)]  # diffs -100, -100, 0: mean -66.67, var 3333.33
    result = naive_mean([a, b])
    assert result is not None and result.n == 5
    assert result.diff == pytest.approx((50 - 200 / 3) / 2)
    se = math.sqrt(5000 / 2 + (10000 / 3) / 3) / 2
    assert result.low == pytest.approx(result.diff - Z95 * se) and result.high == pytest.approx(result.diff + Z95 * se)
    assert naive_mean([a, []]) is None


def test_the_headline_bootstrap_has_an_interval_when_one_subset_has_a_single_pair() -> None:
    # a naive average of two subsets of one pair each: d = 0 and -100, each weighing 1/2. A resample of 2 pairs
    # is (0, 0) -> 0, one of each -> -50, (-100, -100) -> -100, with chances 1/4, 1/2, 1/4: both tails hold
    # more than 2.5 %, so the interval is exactly [-100, 0]
    result = weighted_bootstrap({"a": [(True, True)], "b": [(True, False)]}, "naive")
    assert result is not None and (result.diff, result.low, result.high, result.n) == (-50.0, -100.0, 0.0, 2)
    normal = naive_mean([[(True, True)], [(True, False)]])
    assert normal is not None and normal.low is None  # the normal approximation has none: what this fixes
    method = result.to_json()["method"]
    assert method["weights"] == "naive average of 2 subset(s): a pair of subset k weighs 1/(K*n_k)"
    assert (method["resamples"], method["seed"], method["confidence"]) == (10_000, 0, 0.95)


def test_the_bootstrap_weighs_as_the_headline_and_its_tails_are_exact_where_they_can_be() -> None:
    # a thin subset (1 pair, +100) and a thick one (4 pairs, all 0): the naive average is (100 + 0) / 2 = 50,
    # the pooled one 100 / 5 = 20
    thin, thick = [(False, True)], [(True, True)] * 2 + [(False, False)] * 2
    naive, micro = weighted_bootstrap({"thin": thin, "thick": thick}, "naive"), \
        weighted_bootstrap({"thin": thin, "thick": thick}, "micro")
    assert naive is not None and micro is not None
    assert (naive.diff, micro.diff) == (50.0, 20.0)
    # no resample draws the +100 pair with chance (4/5)^5 = 33 %: both lower ends are exactly 0
    assert naive.low == 0.0 and micro.low == 0.0
    # pooled, 5 draws: two or more +100 (mean >= 40) with chance 26 %, three or more 5.8 %, four or more 0.67 %:
    # the 97.5th percentile lies among the resamples with exactly three, a mean of 60
    assert micro.high == 60.0
    assert micro.to_json()["method"]["weights"] == "every pair weighs the same (1/N)"
    # the subsets' order does not change the draws (categories go by subset name)
    assert weighted_bootstrap({"thick": thick, "thin": thin}, "naive") == naive


def test_the_bootstrap_edges() -> None:
    assert weighted_bootstrap({}, "naive") is None
    assert weighted_bootstrap({"a": [(True, True)], "b": []}, "naive") is None  # a subset with no pair: no average
    one = weighted_bootstrap({"a": [(False, True)]}, "micro")
    assert one is not None and (one.diff, one.low, one.high, one.n) == (100.0, None, None, 1)
    assert one.to_json()["ci95"] is None
    same = weighted_bootstrap({"a": [(True, False)] * 3}, "micro")
    assert same is not None and (same.low, same.high) == (-100.0, -100.0)  # every resample is the same
