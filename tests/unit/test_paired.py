"""The paired 95 % interval of an accuracy difference, against numbers worked out by hand."""

from __future__ import annotations

import math

import pytest
from orchestra_ops.evals.opencompass.paired import Z95, naive_mean, paired


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
