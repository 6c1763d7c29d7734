"""Latency and token tables: per role, per model, per tool (end to end and the expert alone), per task.

Latencies are those of calls that succeeded (a failed call's time says how long it took to fail,
not how long the model takes); failed calls are counted per group under `errors`. Expert-only
times follow the users' analyser: search = the query writer's call, answer = the expert without
the judge, enhance_reasoning = the code writer's call without running the code.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from orchestra_ops.core.stats import summarize, totals
from orchestra_ops.runner.profile_reader import ModelCall, Profile, ToolCall

ALL = "(all)"
Event = TypeVar("Event", ModelCall, ToolCall)


def _grouped(events: Iterable[Event], key: Callable[[Event], str]) -> dict[str, list[Event]]:
    groups: dict[str, list[Event]] = defaultdict(list)
    for event in events:
        groups[key(event)].append(event)
    return dict(sorted(groups.items()))


def model_call_rows(calls: list[ModelCall], key: Callable[[ModelCall], str]) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for name, group in _grouped(calls, key).items():
        ok = [c for c in group if c.ok]
        rows[name] = {**summarize(c.latency for c in ok), "errors": len(group) - len(ok),
                      "retried": sum(1 for c in group if c.attempts > 1),
                      "prompt_tokens": totals(c.prompt_tokens for c in ok),
                      "completion_tokens": totals(c.completion_tokens for c in ok)}
    return rows


def tool_rows(calls: list[ToolCall], *, expert: bool) -> dict[str, dict[str, Any]]:
    """One row per tool (and `(all)` when there are several): end to end, or the expert part alone."""
    def value(call: ToolCall) -> float | None:
        return call.expert if expert else call.latency

    rows: dict[str, dict[str, Any]] = {}
    counted = [c for c in calls if not c.ok or value(c) is not None]  # failed calls count as errors
    groups = _grouped(counted, lambda c: c.tool)
    for name, group in groups.items():
        rows[name] = _tool_row(group, value)
    if len(groups) > 1:
        rows[ALL] = _tool_row(counted, value)
    return rows


def _tool_row(calls: list[ToolCall], value: Callable[[ToolCall], float | None]) -> dict[str, Any]:
    return {**summarize(v for c in calls if c.ok and (v := value(c)) is not None),
            "errors": sum(1 for c in calls if not c.ok)}


def tool_part_rows(calls: list[ToolCall]) -> dict[str, dict[str, dict[str, Any]]]:
    """tool -> part -> summary of that part's seconds: `expert` first, then the others (retrieval, judge…)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for tool, group in _grouped([c for c in calls if c.ok], lambda c: c.tool).items():
        parts: dict[str, list[float]] = defaultdict(list)
        for call in group:
            if call.expert is not None:
                parts["expert"].append(call.expert)
            for part, seconds in sorted(call.parts.items()):
                parts[part].append(seconds)
        if parts:
            out[tool] = {part: summarize(values) for part, values in parts.items()}
    return out


def call_errors(profile: Profile) -> dict[str, int]:
    """Failed model and tool calls by error kind (`status`)."""
    counts = Counter(c.status for c in profile.model_calls if not c.ok)
    counts.update(f"{c.tool}:{c.status}" for c in profile.tool_calls if not c.ok)
    return dict(counts.most_common())


def model_shadowed_by_role(calls: list[ModelCall]) -> set[str]:
    """Models whose calls are exactly one role's calls (their histogram would repeat the role's)."""
    roles_of: dict[str, set[str]] = defaultdict(set)
    models_of: dict[str, set[str]] = defaultdict(set)
    for call in calls:
        roles_of[call.model].add(call.role)
        models_of[call.role].add(call.model)
    return {model for model, roles in roles_of.items()
            if len(roles) == 1 and models_of[next(iter(roles))] == {model}}
