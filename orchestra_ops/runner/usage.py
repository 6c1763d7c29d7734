"""Tokens and cost per role over a whole run dir (every call of every attempt: profile.jsonl).

A row: `calls` (model calls made, failed ones included), `prompt_tokens`, `completion_tokens` (the
usage the models reported), `cost_usd` (the sum of the calls' recorded `cost`, client/pricing.py;
None when no call of the row was priced), and apart, what the response cache answered: `cache_hits`,
`cache_hit_prompt_tokens`, `cache_hit_completion_tokens` (they cost nothing). scores.json (`usage`),
stats.json (`usage`), report.html and the end of `ops eval` show these rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from orchestra_ops.client.pricing import format_usd
from orchestra_ops.runner.profile_reader import ModelCall, Profile

TOTAL = "(all)"


def usage_row(calls: Iterable[ModelCall]) -> dict[str, Any]:
    row: dict[str, Any] = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": None,
                           "cache_hits": 0, "cache_hit_prompt_tokens": 0, "cache_hit_completion_tokens": 0}
    for call in calls:
        prefix = "cache_hit_" if call.cached else ""
        if call.cached:
            row["cache_hits"] += 1
        else:
            row["calls"] += 1
        row[f"{prefix}prompt_tokens"] += call.prompt_tokens or 0
        row[f"{prefix}completion_tokens"] += call.completion_tokens or 0
        if call.cost is not None:
            row["cost_usd"] = (row["cost_usd"] or 0.0) + (0.0 if call.cached else call.cost)
    if row["cost_usd"] is not None:
        row["cost_usd"] = round(row["cost_usd"], 9)
    return row


def usage(profile: Profile) -> dict[str, Any]:
    """`{"by_role": {role: row}, "total": row}` (rows: see the module doc)."""
    roles: dict[str, list[ModelCall]] = {}
    for call in profile.model_calls:
        roles.setdefault(call.role, []).append(call)
    return {"by_role": {role: usage_row(calls) for role, calls in sorted(roles.items())},
            "total": usage_row(profile.model_calls)}


def usage_lines(summary: Mapping[str, Any]) -> Iterator[str]:
    """The lines `ops eval` ends with: one per role, and the total when there are several roles."""
    rows = dict(summary.get("by_role") or {})
    if not rows:
        return
    yield "usage (every call in this run dir, all attempts):"
    if len(rows) > 1:
        rows[TOTAL] = summary["total"]
    width = max(len(name) for name in rows)
    for name, row in rows.items():
        yield f"  {name:<{width}}  {describe(row)}"


def describe(row: Mapping[str, Any]) -> str:
    text = (f"{row['calls']} call(s), {row['prompt_tokens']:,} prompt + {row['completion_tokens']:,} completion "
            f"tokens, cost {format_usd(row['cost_usd']) if row['cost_usd'] is not None else 'not priced'}")
    if row["cache_hits"]:
        text += (f"; {row['cache_hits']} cache hit(s), free ({row['cache_hit_prompt_tokens']:,} prompt + "
                 f"{row['cache_hit_completion_tokens']:,} completion tokens)")
    return text
