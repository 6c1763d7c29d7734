"""The posttrain verdict from the paired interval of adapter - base (the package's doc has the rule), and how
many paired samples would likely decide an inconclusive one."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


def verdict(ci95: Sequence[float] | None, max_drop: float) -> str:
    """pass / block / inconclusive from the interval of adapter - base (see the module doc)."""
    if not ci95:
        return "inconclusive"
    if ci95[0] > -max_drop:
        return "pass"
    if ci95[1] < -max_drop:
        return "block"
    return "inconclusive"


def samples_to_decide(difference: float, ci95: Sequence[float] | None, n: int, max_drop: float) -> dict[str, Any]:
    """How many paired samples would likely decide an inconclusive verdict, and how that was estimated.

    The interval's half-width shrinks as 1/sqrt(n). If the difference and the spread per sample stay as
    measured, the side of the interval facing -max_drop (lower for a difference above it, upper below)
    clears it once n' > n * (that side's width / |difference + max_drop|)^2.
    """
    how = ("n * (w / |d + max_drop|)^2, w the side of the interval facing -max_drop: its half-width shrinks as "
           "1/sqrt(n); assumes the difference d and the spread per sample stay as measured (a naive average's "
           "subsets growing in proportion)")
    if not ci95:
        return {"samples": None, "how": f"{n} paired sample(s): no interval under 2; run more (a larger --sample, "
                "or none) to measure the spread"}
    margin = difference + max_drop
    side = difference - ci95[0] if margin > 0 else ci95[1] - difference
    if margin == 0 or side <= 0:
        return {"samples": None, "how": f"the difference is {difference:+g}, on -max_drop itself: no number of "
                "samples decides it if it stays there"}
    return {"samples": math.floor(n * (side / abs(margin)) ** 2) + 1, "how": how}


def inconclusive_message(result: Mapping[str, Any]) -> str:
    """One line per inconclusive dataset: its interval and the samples that would likely decide it."""
    parts = []
    for name, row in result["datasets"].items():
        if row["verdict"] != "inconclusive":
            continue
        ci = row["ci95"]
        span = f"95% interval [{ci[0]:+.2f}, {ci[1]:+.2f}] holds -{result['max_drop']:g}" if ci else "no interval"
        need = row["samples_to_decide"]["samples"]
        more = f"about {need} paired samples would decide it" if need else "more samples may not decide it"
        parts.append(f"{name}: adapter - base {row['delta']:+.2f} points, {span} ({row['n']} paired); {more}")
    return "inconclusive: " + "; ".join(parts)
