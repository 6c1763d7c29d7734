"""Accuracies and the paired 95 % interval of the difference between two models on the same samples.

Every interval is the normal approximation `diff ± 1.96 · se`, in percentage points:

* one dataset (or the micro accuracy of several, samples pooled): `d_i = 100·(b_i - a_i)` over the
  samples both models answered; `diff = mean(d)`, `se = sd(d) / sqrt(n)` (sd with n - 1).
* the naive mean over K subsets (OpenCompass's `naive_average` group rows): `diff = (1/K) Σ_k mean(d_k)`,
  `se = (1/K) sqrt(Σ_k var(d_k) / n_k)` (the subsets' samples are independent).

n < 2 in any part gives no interval (None), never a made-up one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Z95 = 1.959963984540054
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
