"""Summary statistics of a list of latencies, as the users' analysers computed them.

Percentiles interpolate linearly between the two nearest ranks (numpy's default `linear`
method); `std` is the population standard deviation (ddof=0, `np.std`'s default, as
`analyze_tool_latency.py` reports it); `under_5s` is the share of values below 5 seconds.
Pure Python on purpose: `ops analyze` needs no numpy for its numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

PERCENTILES: tuple[int, ...] = (10, 25, 50, 90, 95, 99)
UNDER_THRESHOLD_S = 5.0


def percentile(ordered: Sequence[float], p: float) -> float:
    """The p-th percentile (0..100) of an ascending sequence, linear between closest ranks."""
    if not ordered:
        raise ValueError("percentile of no values")
    if not 0 <= p <= 100:
        raise ValueError(f"percentile {p} is outside 0..100")
    rank = (len(ordered) - 1) * p / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    fraction = rank - low
    return ordered[low] + (ordered[high] - ordered[low]) * fraction


def summarize(values: Iterable[float], *, threshold_s: float = UNDER_THRESHOLD_S) -> dict[str, Any]:
    """count, mean, std, min, max, p10 … p99 and the share under `threshold_s` (None fields when empty)."""
    ordered = sorted(float(v) for v in values)
    count = len(ordered)
    if count == 0:
        return {"count": 0, "mean": None, "std": None, "min": None, "max": None,
                **{f"p{p}": None for p in PERCENTILES}, "under_5s": None}
    mean = math.fsum(ordered) / count
    variance = math.fsum((v - mean) ** 2 for v in ordered) / count
    return {"count": count, "mean": mean, "std": math.sqrt(variance), "min": ordered[0], "max": ordered[-1],
            **{f"p{p}": percentile(ordered, p) for p in PERCENTILES},
            "under_5s": sum(1 for v in ordered if v < threshold_s) / count}


def totals(values: Iterable[float | int | None]) -> dict[str, Any]:
    """count of known values, their sum and mean (token counts: None when a call reported none)."""
    known = [v for v in values if v is not None]
    total = sum(known)
    return {"count": len(known), "sum": total, "mean": total / len(known) if known else None}
