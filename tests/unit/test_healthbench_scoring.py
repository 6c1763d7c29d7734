"""HealthBench scoring: the reference's per-example score, tag metrics, clipped means and the bootstrap."""

from __future__ import annotations

import math
import random

import pytest
from orchestra_ops.evals.healthbench.scoring import (
    aggregate,
    bootstrap_std,
    calculate_score,
    clipped_mean,
    example_metrics,
    metric_names,
    score_table,
)

from tests.integration.healthbench_fixtures import reference_bootstrap_std


def item(points: int, met: bool, *tags: str) -> dict:
    return {"criterion": f"c{points}{tags}", "points": points, "tags": list(tags), "criteria_met": met}


def test_the_reference_unit_test_vector() -> None:
    items = [item(7, True), item(5, False), item(10, True), item(-6, True)]
    assert calculate_score(items, [True, False, True, True]) == (7 + 10 - 6) / 22 == 0.5


def test_an_example_score_is_not_clipped_and_needs_positive_points() -> None:
    assert calculate_score([item(2, False), item(-6, True)], [False, True]) == -3.0
    assert calculate_score([item(-2, True)], [True]) is None
    with pytest.raises(ValueError):
        calculate_score([item(2, True)], [True, False])


def test_tag_metrics_follow_the_reference() -> None:
    items = [item(4, True, "axis:accuracy", "level:example"), item(6, False, "axis:accuracy", "level:cluster"),
             item(-3, True, "axis:communication_quality", "level:example"),  # an axis with only a negative item
             item(2, True, "axis:completeness", "theme:hedging")]  # a rubric tag that is also an example tag
    metrics = example_metrics(items, ["theme:hedging", "physician_agreed_category:enough-context"])
    overall = (4 - 3 + 2) / 12
    assert metrics == {"overall_score": overall, "theme:hedging": 1.0,
                       "physician_agreed_category:enough-context": overall,
                       "axis:accuracy": 0.4, "level:example": (4 - 3) / 4, "level:cluster": 0.0,
                       "axis:completeness": 1.0}
    assert "axis:communication_quality" not in metrics


def test_means_are_clipped_not_the_examples() -> None:
    assert clipped_mean([-0.5, 0.2]) == 0.0
    assert clipped_mean([-0.5, 1.0, 1.0]) == pytest.approx(0.5)
    out = aggregate([{"overall_score": -0.5, "axis:accuracy": 0.25}, {"overall_score": 0.9}])
    assert out["overall_score"] == pytest.approx(0.2) and out["overall_score:n_samples"] == 2
    assert out["axis:accuracy"] == 0.25 and out["axis:accuracy:n_samples"] == 1
    assert out["axis:accuracy:bootstrap_std"] == 0.0
    assert out["score"] == out["overall_score"] and out["score:n_samples"] == 2 and "score:bootstrap_std" in out
    assert list(out) == sorted(out)
    assert aggregate([]) == {}


def test_bootstrap_matches_an_independent_computation_and_is_seeded() -> None:
    rng = random.Random(3)
    for n in (1, 2, 7, 50):
        values = [rng.uniform(-0.4, 1.0) for _ in range(n)]
        got = bootstrap_std(values, "axis:accuracy")
        assert math.isclose(got, reference_bootstrap_std(values, "axis:accuracy"), rel_tol=1e-9, abs_tol=1e-15)
        assert got == bootstrap_std(list(values), "axis:accuracy")  # two runs agree
    values = [rng.uniform(-0.4, 1.0) for _ in range(50)]
    assert bootstrap_std(values, "a") != bootstrap_std(values, "b")  # each metric has its own stream
    assert bootstrap_std(values, "a", seed=1) != bootstrap_std(values, "a")


def test_bootstrap_agrees_with_numpy_resampling_within_sampling_noise() -> None:
    np = pytest.importorskip("numpy")
    rng = random.Random(9)
    for n in (40, 200):
        values = [rng.choice((0.0, 0.25, 0.5, 0.8, 1.0, -0.2)) for _ in range(n)]
        generator = np.random.default_rng(0)
        samples = generator.choice(np.array(values), size=(1000, n), replace=True)
        theirs = float(np.std(np.clip(samples.mean(axis=1), 0, 1)))
        ours = bootstrap_std(values, "overall_score")
        assert abs(ours - theirs) / theirs < 0.15
        assert abs(ours - float(np.std(values)) / math.sqrt(n)) / ours < 0.15  # the standard error


def test_the_table_orders_overall_axes_themes_then_the_rest() -> None:
    metrics = aggregate([{"overall_score": 0.5, "theme:hedging": 0.5, "axis:accuracy": 1.0, "level:example": 0.5,
                          "cluster:x": 0.5, "zz": 0.1}])
    assert metric_names(metrics) == ["overall_score", "axis:accuracy", "theme:hedging", "level:example",
                                     "cluster:x", "zz"]
    lines = score_table(metrics)
    assert lines[0].split() == ["metric", "score", "n", "bootstrap", "std"]
    assert lines[1].split() == ["overall_score", "0.5000", "1", "0.0000"]
    assert score_table({}) == []
