"""Histograms with linear and log-spaced bins, as `analyze_hle_timing.py` made them.

Linear: `bins` equal-width bins from min to max (numpy's `histogram`; when min == max the range
is widened to min-0.5 … max+0.5). Log: `bins` bins evenly spaced in log10 from the smallest
positive value to the max (hi = lo·10 when they are equal); values <= 0 are counted in the first
bin. Every bin is half-open [a, b) except the last, which also holds b. `percent` is each
count's share of all values, in percent.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import Any, Literal

Scale = Literal["linear", "log"]


def linear_edges(low: float, high: float, bins: int) -> list[float]:
    if bins < 1:
        raise ValueError("bins must be at least 1")
    if low == high:
        low, high = low - 0.5, high + 0.5
    width = (high - low) / bins
    edges = [low + i * width for i in range(bins)] + [high]
    return edges


def log_edges(low: float, high: float, bins: int) -> list[float]:
    """Edges evenly spaced in log10 between two positive numbers (the ends exactly as given)."""
    if bins < 1:
        raise ValueError("bins must be at least 1")
    if low <= 0:
        raise ValueError("log bins need a positive lower edge")
    if high <= low:
        high = low * 10
    a, b = math.log10(low), math.log10(high)
    inner = [10 ** (a + (b - a) * i / bins) for i in range(1, bins)]
    return [low, *inner, high]


def count_into(values: Sequence[float], edges: Sequence[float]) -> list[int]:
    """Counts per bin; values outside [edges[0], edges[-1]] are not counted."""
    counts = [0] * (len(edges) - 1)
    last = len(counts) - 1
    for value in values:
        if value < edges[0] or value > edges[-1]:
            continue
        index = min(bisect.bisect_right(edges, value) - 1, last)
        counts[index] += 1
    return counts


def histogram(values: Sequence[float], bins: int, scale: Scale) -> dict[str, Any] | None:
    """{"edges", "counts", "percent"}; None when there is nothing to bin (no values; log: none > 0)."""
    if not values:
        return None
    if scale == "linear":
        edges = linear_edges(min(values), max(values), bins)
        counts = count_into(values, edges)
    else:
        positive = [v for v in values if v > 0]
        if not positive:
            return None
        edges = log_edges(min(positive), max(positive), bins)
        counts = count_into([max(v, edges[0]) for v in values], edges)
    total = len(values)
    return {"scale": scale, "edges": edges, "counts": counts, "percent": [100 * c / total for c in counts]}
