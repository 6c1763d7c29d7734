"""Where a run's time went: for each role (model calls) and each tool, its calls, the seconds they took and
their share of the task time (the sum of every task's end-to-end time).

Shares are of task time, not of wall time: tasks run side by side, a tool's time holds the expert call it
makes, and the calls of a task may overlap, so they need not add up to 100 %. A cache hit took no model time
and is left out; a failed call's time counts (it was spent).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from orchestra_ops.runner.profile_reader import Profile


def time_share(profile: Profile, final: Mapping[Any, Mapping[str, Any]]) -> dict[str, Any]:
    task_seconds = sum(float(r["elapsed"]) for r in final.values() if isinstance(r.get("elapsed"), (int, float)))
    roles = _groups(((c.role, c.latency) for c in profile.model_calls if not c.cached), task_seconds)
    tools = _groups(((c.tool, c.latency) for c in profile.tool_calls), task_seconds)
    return {"task_seconds": task_seconds, "roles": roles, "tools": tools}


def _groups(items: Iterable[tuple[str, float]], task_seconds: float) -> dict[str, dict[str, Any]]:
    seconds: dict[str, float] = {}
    calls: dict[str, int] = {}
    for name, latency in items:
        seconds[name] = seconds.get(name, 0.0) + latency
        calls[name] = calls.get(name, 0) + 1
    ordered = sorted(seconds, key=lambda name: -seconds[name])
    return {name: {"calls": calls[name], "seconds": seconds[name],
                   "share": seconds[name] / task_seconds if task_seconds > 0 else None} for name in ordered}
