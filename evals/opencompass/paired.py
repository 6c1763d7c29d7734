"""Accuracies and the paired 95 % interval of the difference between two models on the same samples.

Every interval is the normal approximation `diff ± 1.96 · se`, in percentage points:

* one dataset (or the micro accuracy of several, samples pooled): `d_i = 100·(b_i - a_i)` over the
  samples both models answered; `diff = mean(d)`, `se = sd(d) / sqrt(n)` (sd with n - 1).
* the naive mean over K subsets (OpenCompass's `naive_average` group rows): `diff = (1/K) Σ_k mean(d_k)`,
  `se = (1/K) sqrt(Σ_k var(d_k) / n_k)` (the subsets' samples are independent).

n < 2 in any part gives no interval (None), never a made-up one.

The headline a gate acts on (`ops posttrain`, multi_opencompass.py) uses `weighted_bootstrap` instead:
a paired percentile bootstrap over *all* the samples, each weighted as the headline weighs it (the
naive average: a pair of subset k of K weighs 1/(K·n_k); one dataset or a micro average: 1/N). It has
an interval whenever there are two or more pairs in all, also when one subset (a thin mmlu subject)
has a single pair. Resample b draws N pairs with replacement from all N; its statistic is the weighted
mean Σ w·d / Σ w of the drawn pairs; the interval is the 2.5th and 97.5th percentile (linear
interpolation) of BOOTSTRAP_RESAMPLES such statistics. The draw is exact and cheap: the pairs fall
into categories (subset name, difference) (at most 3 per subset for 0/1 scores; sorted), and one resample is one
multinomial draw of N over the categories' shares (numpy's PCG64 seeded with BOOTSTRAP_SEED), which is
the same distribution as drawing the N pairs one by one.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

Z95 = 1.959963984540054
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
Weighting = Literal["naive", "micro"]
Pair = tuple[bool, bool]  # (baseline correct, other correct) on one sample


@dataclass(frozen=True)
class Interval:
    diff: float  # percentage points, other - baseline
    low: float | None
    high: float | None
    n: int  # paired samples

    def to_json(self) -> dict[str, object]:
        ci = None if self.low is None or self.high is None else [round(self.low, 4), round(self.high, 4)]
        return {"difference": round(self.diff, 4), "ci95": ci, "n": self.n}


def _mean_var(pairs: Sequence[Pair]) -> tuple[float, float | None]:
    diffs = [100.0 * (int(b) - int(a)) for a, b in pairs]
    mean = sum(diffs) / len(diffs)
    if len(diffs) < 2:
        return mean, None
    return mean, sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)


def paired(pairs: Sequence[Pair]) -> Interval | None:
    """The difference of accuracies on one set of samples (None when no sample has both answers)."""
    if not pairs:
        return None
    mean, var = _mean_var(pairs)
    if var is None:
        return Interval(mean, None, None, len(pairs))
    se = math.sqrt(var / len(pairs))
    return Interval(mean, mean - Z95 * se, mean + Z95 * se, len(pairs))


def naive_mean(subsets: Sequence[Sequence[Pair]]) -> Interval | None:
    """The difference of naive (unweighted) means of subset accuracies."""
    if not subsets or any(not pairs for pairs in subsets):
        return None
    parts = [_mean_var(pairs) for pairs in subsets]
    k = len(parts)
    diff = sum(mean for mean, _ in parts) / k
    n = sum(len(pairs) for pairs in subsets)
    if any(var is None for _, var in parts):
        return Interval(diff, None, None, n)
    se = math.sqrt(sum((var or 0.0) / len(pairs) for (_, var), pairs in zip(parts, subsets, strict=True))) / k
    return Interval(diff, diff - Z95 * se, diff + Z95 * se, n)


@dataclass(frozen=True)
class BootstrapInterval:
    """The headline difference with its weighted paired bootstrap interval (see the module doc)."""

    diff: float  # percentage points, other - baseline, weighted as the headline is
    low: float | None  # None: fewer than two pairs in all
    high: float | None
    n: int  # paired samples, all subsets together
    subsets: int
    weighting: Weighting

    def method(self) -> dict[str, Any]:
        weights = (f"naive average of {self.subsets} subset(s): a pair of subset k weighs 1/(K*n_k)"
                   if self.weighting == "naive" else "every pair weighs the same (1/N)")
        return {"name": "paired percentile bootstrap over all samples", "weights": weights,
                "resamples": BOOTSTRAP_RESAMPLES, "seed": BOOTSTRAP_SEED, "confidence": 0.95,
                "percentiles": [2.5, 97.5], "rng": "numpy PCG64, one multinomial draw per resample"}

    def to_json(self) -> dict[str, Any]:
        ci = None if self.low is None or self.high is None else [round(self.low, 4), round(self.high, 4)]
        return {"difference": round(self.diff, 4), "ci95": ci, "n": self.n, "method": self.method()}


def weighted_bootstrap(subsets: Mapping[str, Sequence[Pair]], weighting: Weighting) -> BootstrapInterval | None:
    """The headline difference over `subsets` (name -> pairs; naive: the mean of subset means; micro: pooled)
    and its interval; None when a subset has no pair (the naive average is undefined) or there is no pair.
    The categories are ordered by (subset name, difference), so the interval does not depend on the order
    the subsets come in."""
    if not subsets or any(not pairs for pairs in subsets.values()):
        return None
    k, total = len(subsets), sum(len(pairs) for pairs in subsets.values())
    exact = {name: Fraction(1, k * len(pairs)) if weighting == "naive" else Fraction(1, total)
             for name, pairs in subsets.items()}
    shares: Counter[tuple[str, int]] = Counter()
    for name, pairs in subsets.items():
        for a, b in pairs:
            shares[(name, 100 * (int(b) - int(a)))] += 1
    diff = float(sum(exact[name] * d * count for (name, d), count in shares.items()))
    if total < 2:
        return BootstrapInterval(diff, None, None, total, k, weighting)
    import numpy as np

    categories = sorted(shares)
    probabilities = np.array([shares[c] / total for c in categories])
    weights = np.array([float(exact[name]) for name, _ in categories])
    values = np.array([float(exact[name]) * d for name, d in categories])
    rng = np.random.Generator(np.random.PCG64(BOOTSTRAP_SEED))
    draws = rng.multinomial(total, probabilities, size=BOOTSTRAP_RESAMPLES)
    statistics = np.round((draws @ values) / (draws @ weights), 9)  # no float dust: -100, not -99.99999999999999
    low, high = np.percentile(statistics, [2.5, 97.5])
    return BootstrapInterval(diff, float(low), float(high), total, k, weighting)
