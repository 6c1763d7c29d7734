"""Throughput and concurrency over the run, in time buckets, from the profile's call intervals."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from orchestra_ops.runner.profile_reader import ModelCall, Profile, ToolCall

MAX_BUCKETS = 200


def busy_seconds(intervals: Sequence[tuple[float, float]]) -> float:
    """Length of the union of [start, end] intervals: the time at least one call was in flight.

    A resumed run has gaps (hours between two invocations); rates over the busy time ignore them.
    """
    total = 0.0
    current_start: float | None = None
    current_end = 0.0
    for start, end in sorted(intervals):
        if current_start is None or start > current_end:
            if current_start is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_start is not None:
        total += current_end - current_start
    return total


def task_intervals(calls: Sequence[ModelCall | ToolCall]) -> list[tuple[float, float]]:
    """Per task id (when events carry one): first event start to last event end."""
    spans: dict[str, tuple[float, float]] = {}
    for call in calls:
        if call.task is None:
            continue
        start, end = spans.get(call.task, (call.start, call.end))
        spans[call.task] = (min(start, call.start), max(end, call.end))
    return list(spans.values())


def timeline(profile: Profile) -> dict[str, Any] | None:
    """Buckets from the first call to the last: calls finished per second, mean calls (and tasks) in flight."""
    calls = profile.model_calls
    span = profile.span
    if not calls or span is None:
        return None
    begin, finish = span
    duration = max(finish - begin, 1e-3)
    buckets = min(MAX_BUCKETS, max(1, math.ceil(duration)))
    width = duration / buckets
    tasks = task_intervals([*calls, *profile.tool_calls])
    return {"t0": begin, "bucket_s": width, "t": [round(i * width, 6) for i in range(buckets)],
            "calls_per_s": _per_second([c.end for c in calls], begin, width, buckets),
            "tasks_per_s": _per_second([end for _, end in tasks], begin, width, buckets) if tasks else None,
            "calls_in_flight": _mean_in_flight([(c.start, c.end) for c in calls], begin, width, buckets),
            "tasks_in_flight": _mean_in_flight(tasks, begin, width, buckets) if tasks else None}


def _per_second(ends: Sequence[float], begin: float, width: float, buckets: int) -> list[float]:
    finished = [0] * buckets
    for end in ends:
        finished[max(0, min(int((end - begin) / width), buckets - 1))] += 1
    return [n / width for n in finished]


def _mean_in_flight(intervals: Sequence[tuple[float, float]], begin: float, width: float,
                    buckets: int) -> list[float]:
    """Per bucket: the time-average number of intervals open (their overlap with it / its width)."""
    area = [0.0] * buckets
    for start, end in intervals:
        first = max(0, min(int((start - begin) / width), buckets - 1))
        last = max(0, min(int((end - begin) / width), buckets - 1))
        for index in range(first, last + 1):
            low, high = begin + index * width, begin + (index + 1) * width
            area[index] += max(0.0, min(end, high) - max(start, low))
    return [a / width for a in area]
