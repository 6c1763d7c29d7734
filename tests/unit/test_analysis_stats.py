"""Latency statistics and histograms: exact values on inputs whose answers are known."""

from __future__ import annotations

import math
import random
import statistics

import numpy as np
import pytest

from orchestra_ops.analysis.histogram import count_into, histogram, linear_edges, log_edges
from orchestra_ops.core.stats import percentile, summarize


def test_summary_of_1_to_101_seconds_is_known_exactly() -> None:
    values = list(range(101, 0, -1))  # 1..101 s, shuffled order must not matter
    s = summarize(values)
    assert s == {"count": 101, "mean": 51.0, "std": math.sqrt(850.0), "min": 1.0, "max": 101.0,
                 "p10": 11.0, "p25": 26.0, "p50": 51.0, "p90": 91.0, "p95": 96.0, "p99": 100.0,
                 "under_5s": 4 / 101}


def test_percentiles_interpolate_linearly_between_ranks() -> None:
    s = summarize([10.0, 0.0])
    assert (s["p10"], s["p25"], s["p50"], s["p90"], s["p95"], s["p99"]) == pytest.approx((1, 2.5, 5, 9, 9.5, 9.9))
    assert s["std"] == 5.0  # population std (ddof=0), as np.std
    assert s["under_5s"] == 0.5  # 0 < 5, 10 is not
    assert summarize([4.999, 5.0, 5.001])["under_5s"] == pytest.approx(1 / 3)  # 5.0 itself is not under 5 s


def test_summary_matches_numpy_on_random_latencies() -> None:
    rng = random.Random(7)
    values = [rng.lognormvariate(1, 1.2) for _ in range(1013)]
    s = summarize(values)
    for p in (10, 25, 50, 90, 95, 99):
        assert s[f"p{p}"] == pytest.approx(float(np.percentile(values, p)), rel=1e-12)
    assert s["std"] == pytest.approx(statistics.pstdev(values), rel=1e-12)
    assert s["mean"] == pytest.approx(statistics.fmean(values), rel=1e-12)


def test_empty_and_single_value() -> None:
    assert summarize([])["count"] == 0 and summarize([])["p50"] is None
    one = summarize([3.0])
    assert one["p10"] == one["p99"] == one["min"] == one["max"] == 3.0 and one["std"] == 0.0
    with pytest.raises(ValueError):
        percentile([], 50)


def test_linear_bins_known_counts() -> None:
    values = [i / 2 for i in range(21)]  # 0, 0.5, …, 10
    hist = histogram(values, 10, "linear")
    assert hist is not None
    assert hist["edges"] == [float(i) for i in range(11)]
    assert hist["counts"] == [2] * 9 + [3]  # the last bin holds its right edge (10)
    assert hist["percent"] == pytest.approx([100 * 2 / 21] * 9 + [100 * 3 / 21])


def test_linear_bins_of_equal_values_widen_the_range_like_numpy() -> None:
    hist = histogram([5.0, 5.0, 5.0], 10, "linear")
    assert hist is not None
    assert hist["edges"][0] == 4.5 and hist["edges"][-1] == 5.5
    assert hist["counts"] == [0, 0, 0, 0, 0, 3, 0, 0, 0, 0]
    assert hist["counts"] == np.histogram([5.0, 5.0, 5.0], bins=10)[0].tolist()


def test_linear_bins_match_numpy_histogram() -> None:
    rng = random.Random(3)
    for bins in (1, 7, 10, 33):
        values = [rng.expovariate(0.2) for _ in range(997)]
        counts, edges = np.histogram(values, bins=bins)
        hist = histogram(values, bins, "linear")
        assert hist is not None
        assert hist["counts"] == counts.tolist()
        assert hist["edges"] == pytest.approx(edges.tolist(), rel=1e-15)


def test_log_bins_over_four_decades() -> None:
    values = [0.001, 0.003, 0.02, 0.05, 0.5, 2.0, 9.0, 10.0]
    hist = histogram(values, 4, "log")
    assert hist is not None
    assert hist["edges"] == pytest.approx([0.001, 0.01, 0.1, 1.0, 10.0], rel=1e-12)
    assert hist["edges"][0] == 0.001 and hist["edges"][-1] == 10.0  # the ends exactly
    assert hist["counts"] == [2, 2, 1, 3]
    # 8 bins: two per decade, each edge 10**0.5 times the one before
    fine = histogram(values, 8, "log")
    assert fine is not None
    ratios = [b / a for a, b in zip(fine["edges"], fine["edges"][1:], strict=False)]
    assert ratios == pytest.approx([10**0.5] * 8, rel=1e-12)
    # edges 0.001, 0.00316, 0.01, 0.0316, 0.1, 0.316, 1, 3.16, 10
    assert fine["counts"] == [2, 0, 1, 1, 0, 1, 1, 2]  # 0.001,0.003 | - | 0.02 | 0.05 | - | 0.5 | 2 | 9,10
    assert sum(fine["counts"]) == len(values)


def test_log_bins_match_the_users_analyser() -> None:
    """analyze_hle_timing.py: logspace over [min positive, max], non-positive values clamped into bin 0."""
    rng = random.Random(5)
    values = [10 ** rng.uniform(-2, 2) for _ in range(500)] + [0.0, -1.0]
    hist = histogram(values, 10, "log")
    assert hist is not None
    positive = [v for v in values if v > 0]
    lo, hi = min(positive), max(positive)
    edges = np.logspace(np.log10(lo), np.log10(hi), 11)
    edges[0], edges[-1] = lo, hi
    counts = np.histogram(np.clip(values, lo, None), bins=edges)[0].tolist()
    assert hist["counts"] == counts
    assert hist["counts"][0] >= 2 and sum(hist["counts"]) == len(values)


def test_log_bins_of_one_value_span_a_decade_and_none_without_positive_values() -> None:
    assert log_edges(2.0, 2.0, 2) == pytest.approx([2.0, 2.0 * 10**0.5, 20.0])
    assert histogram([0.0, -3.0], 10, "log") is None
    assert histogram([], 10, "linear") is None
    with pytest.raises(ValueError):
        linear_edges(0, 1, 0)
    assert count_into([-1.0, 0.5, 2.0], [0.0, 1.0]) == [1]  # outside the edges: not counted
