"""Paired tests for the score difference of two runs over the same task ids.

`paired_bootstrap`: resample the shared ids with replacement (seeded), take the mean of B − A in
each resample; the interval is the 2.5th and 97.5th percentile of those means (the percentile
bootstrap). `mcnemar`: for 0/1 scores, the exact two-sided binomial test on the discordant pairs
(b: A right and B wrong, c: A wrong and B right), p = min(1, 2·P[X <= min(b, c)]), X ~ Bin(b+c, ½).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from orchestra_ops.core.stats import percentile


@dataclass(frozen=True)
class Interval:
    difference: float  # mean(B − A) over the pairs
    low: float
    high: float
    confidence: float
    resamples: int
    seed: int

    def covers(self, value: float) -> bool:
        return self.low <= value <= self.high

    def to_json(self) -> dict[str, Any]:
        return {"difference": self.difference, "low": self.low, "high": self.high, "confidence": self.confidence,
                "resamples": self.resamples, "seed": self.seed, "method": "paired percentile bootstrap"}


def paired_bootstrap(a: Sequence[float], b: Sequence[float], *, resamples: int = 2000, seed: int = 0,
                     confidence: float = 0.95) -> Interval:
    if len(a) != len(b):
        raise ValueError("paired samples must have the same length")
    if not a:
        raise ValueError("no pairs to resample")
    differences = [y - x for x, y in zip(a, b, strict=True)]
    n = len(differences)
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(differences, k=n)) / n for _ in range(resamples))
    tail = (1 - confidence) / 2 * 100
    return Interval(sum(differences) / n, percentile(means, tail), percentile(means, 100 - tail),
                    confidence, resamples, seed)


@dataclass(frozen=True)
class McNemar:
    a_only: int  # pairs A got right and B wrong
    b_only: int  # pairs B got right and A wrong
    p_value: float

    def to_json(self) -> dict[str, Any]:
        return {"a_right_b_wrong": self.a_only, "a_wrong_b_right": self.b_only, "p_value": self.p_value,
                "method": "exact two-sided binomial on discordant pairs"}


def mcnemar(a: Sequence[float], b: Sequence[float]) -> McNemar:
    """McNemar's exact test for two 0/1 score lists over the same ids."""
    a_only = sum(1 for x, y in zip(a, b, strict=True) if x >= 0.5 > y)
    b_only = sum(1 for x, y in zip(a, b, strict=True) if y >= 0.5 > x)
    return McNemar(a_only, b_only, binomial_two_sided(min(a_only, b_only), a_only + b_only))


def binomial_two_sided(k: int, n: int) -> float:
    """min(1, 2·P[X <= k]) for X ~ Binomial(n, ½), in exact integer arithmetic."""
    if n == 0:
        return 1.0
    term, tail = 1, 0  # C(n, 0), running sum of C(n, i)
    for i in range(k + 1):
        tail += term
        term = term * (n - i) // (i + 1)
    return min(1.0, 2 * tail / 2**n)
