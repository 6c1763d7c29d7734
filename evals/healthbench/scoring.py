"""HealthBench scores as the reference computes them (scoring.md A7-A9), without numpy.

- Example score (`calculate_score`): the points of the items met (a met negative item subtracts)
  over the sum of the positive points; not clipped; None when no item has positive points.
- Example metrics (`example_metrics`): `overall_score`; every example tag (e.g. `theme:hedging`)
  takes the example's score; every rubric tag (e.g. `axis:accuracy`, `level:cluster`) is scored on
  that example's items carrying it and is left out when they have no positive points. A rubric tag
  overwrites an example tag of the same name, as the reference's `dict.update` does.
- Aggregation (`aggregate`): for each metric name, its values over the examples that have it:
  `name` = the mean clipped to [0, 1], `name:n_samples`, `name:bootstrap_std`; plus `score` (the
  example scores again, as the reference collects them), so the keys are the reference's.
- Bootstrap: `resamples` (1,000) draws of n values with replacement, made by
  `random.Random(f"healthbench-bootstrap:{seed}:{name}").choices(values, k=n)` over the values in
  dataset order; the result is the population standard deviation (ddof 0) of the draws' clipped
  means. Seeded per metric name, so two runs over the same grades give the same numbers.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0
_GROUP_ORDER = ("overall_score", "axis:", "theme:", "level:", "cluster:", "physician_agreed_category:")


def calculate_score(items: Sequence[Mapping[str, Any]], met: Sequence[bool]) -> float | None:
    if len(items) != len(met):
        raise ValueError(f"{len(items)} rubric items but {len(met)} grades")
    possible = sum(item["points"] for item in items if item["points"] > 0)
    if possible == 0:
        return None
    achieved = sum(item["points"] for item, ok in zip(items, met, strict=True) if ok)
    return float(achieved / possible)


def example_metrics(items: Sequence[Mapping[str, Any]], example_tags: Sequence[str]) -> dict[str, float]:
    """The metrics of one graded example (every item's `criteria_met` a bool)."""
    overall = calculate_score(items, [bool(item["criteria_met"]) for item in items])
    if overall is None:
        raise ValueError("an example needs at least one rubric item with positive points")
    metrics: dict[str, float] = {"overall_score": overall, **{tag: overall for tag in example_tags}}
    rubric_tags = list(dict.fromkeys(tag for item in items for tag in item.get("tags", ())))
    for tag in rubric_tags:
        subset = [item for item in items if tag in item.get("tags", ())]
        score = calculate_score(subset, [bool(item["criteria_met"]) for item in subset])
        if score is not None:
            metrics[tag] = score
    return metrics


def clipped_mean(values: Sequence[float]) -> float:
    return min(1.0, max(0.0, sum(values) / len(values)))


def bootstrap_std(values: Sequence[float], name: str, *, seed: int = BOOTSTRAP_SEED,
                  resamples: int = BOOTSTRAP_RESAMPLES) -> float:
    rng = random.Random(f"healthbench-bootstrap:{seed}:{name}")
    pool = list(values)
    n = len(pool)
    means = [clipped_mean(rng.choices(pool, k=n)) for _ in range(resamples)]
    return statistics.pstdev(means)


def aggregate(per_example: Sequence[Mapping[str, float]], *, seed: int = BOOTSTRAP_SEED,
              resamples: int = BOOTSTRAP_RESAMPLES) -> dict[str, float | int]:
    """The reference's metrics dict over the scored examples (in dataset order), `score` included."""
    values: dict[str, list[float]] = {}
    for metrics in per_example:
        for name, value in metrics.items():
            values.setdefault(name, []).append(value)
        values.setdefault("score", []).append(metrics["overall_score"])
    out: dict[str, float | int] = {}
    for name, vals in values.items():
        out[name] = clipped_mean(vals)
        out[f"{name}:n_samples"] = len(vals)
        out[f"{name}:bootstrap_std"] = bootstrap_std(vals, name, seed=seed, resamples=resamples)
    return dict(sorted(out.items()))


def metric_names(metrics: Mapping[str, Any]) -> list[str]:
    """The metric names (not their :n_samples/:bootstrap_std keys), overall first, then axes, themes, …"""
    names = [k for k in metrics if not k.endswith((":n_samples", ":bootstrap_std")) and k != "score"]

    def order(name: str) -> tuple[int, str]:
        for rank, prefix in enumerate(_GROUP_ORDER):
            if name == prefix or (prefix.endswith(":") and name.startswith(prefix)):
                return rank, name
        return len(_GROUP_ORDER), name

    return sorted(names, key=order)


def score_table(metrics: Mapping[str, Any]) -> list[str]:
    """`metric  score  n  bootstrap std` rows, one per metric."""
    names = metric_names(metrics)
    if not names:
        return []
    width = max(len("metric"), *(len(n) for n in names))
    lines = [f"  {'metric':<{width}}  {'score':>7}  {'n':>6}  {'bootstrap std':>13}"]
    for name in names:
        std = metrics.get(f"{name}:bootstrap_std")
        shown = f"{std:.4f}" if isinstance(std, float) and math.isfinite(std) else "-"
        lines.append(f"  {name:<{width}}  {metrics[name]:>7.4f}  {metrics.get(f'{name}:n_samples', 0):>6}  "
                     f"{shown:>13}")
    return lines
