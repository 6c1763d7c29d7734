"""Reading a run dir's `profile.jsonl` into typed events (the schema: runner/profile.py).

Each line is one JSON event. `type` says which: `model_call` (the default: lines written before
events had a type are model calls) or `tool_call`. A torn last line (a crash mid-write) and lines
that are not events are skipped and counted, never fatal: the analysis of a week-long run must
not die on one bad byte. Other types are counted and left alone.

model_call: task, role, model, replica, start (epoch s), latency (s), prompt_tokens,
            completion_tokens, attempts, status ("ok" or an error kind), error, cache ("hit"),
            cost (USD, priced targets only).
tool_call:  task, round, tool, alias, target, model, replica, start, latency (s, end to end),
            expert_latency (the expert model's call alone), `<part>_latency` for each other timed
            part (search: retrieval; enhance_reasoning: exec; answer: judge), status, error.
replica_counters, session_move: a replica's prefix-cache counters at the start and end of a run,
            a session that moved to another replica (runner/replica_counters.py); kept as read.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PROFILE_FILE = "profile.jsonl"
PART_SUFFIX = "_latency"
EXPERT_KEY = "expert_latency"


class _Timed:
    """What model and tool calls share: when they began, how long they took, how they ended."""

    start: float
    latency: float
    status: str

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def end(self) -> float:
        return self.start + self.latency


@dataclass(frozen=True)
class ModelCall(_Timed):
    role: str
    model: str
    replica: str | None
    start: float
    latency: float
    prompt_tokens: int | None
    completion_tokens: int | None
    attempts: int
    status: str
    error: str | None = None
    task: str | None = None
    cached: bool = False  # answered from the response cache: no model was called
    cost: float | None = None  # USD, for a priced target (client/pricing.py); None: not priced


@dataclass(frozen=True)
class ToolCall(_Timed):
    tool: str
    model: str | None
    start: float
    latency: float  # end to end
    status: str
    expert: float | None  # the expert model's time alone (None when the tool has no expert call)
    parts: dict[str, float] = field(default_factory=dict)  # other timed parts -> seconds
    task: str | None = None
    alias: str | None = None


@dataclass
class Profile:
    model_calls: list[ModelCall] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    counters: list[dict[str, Any]] = field(default_factory=list)  # replica_counters events, in file order
    moves: list[dict[str, Any]] = field(default_factory=list)  # session_move events
    skipped: int = 0  # lines that were not readable events
    unknown_types: dict[str, int] = field(default_factory=dict)

    @property
    def span(self) -> tuple[float, float] | None:
        """(first start, last end) over every event, or None without events."""
        events: list[ModelCall | ToolCall] = [*self.model_calls, *self.tool_calls]
        if not events:
            return None
        return min(e.start for e in events), max(e.end for e in events)


def read_profile(run_dir: str | Path) -> Profile:
    path = Path(run_dir) / PROFILE_FILE
    profile = Profile()
    try:
        handle = open(path, "rb")  # noqa: SIM115
    except FileNotFoundError:
        return profile
    with handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            if not raw.endswith(b"\n"):
                log.warning("%s:%d: ignoring a torn last line", path, number)
                profile.skipped += 1
                break
            try:
                data = json.loads(raw)
                _add(profile, data)
            except (ValueError, KeyError, TypeError) as exc:
                log.debug("%s:%d: not an event (%s)", path, number, exc)
                profile.skipped += 1
    if profile.skipped:
        log.warning("%s: %d line(s) were not readable events and were skipped", path, profile.skipped)
    return profile


def _add(profile: Profile, data: Any) -> None:
    if not isinstance(data, dict):
        raise TypeError("not an object")
    kind = data.get("type", "model_call")
    if kind == "model_call":
        profile.model_calls.append(_model_call(data))
    elif kind == "tool_call":
        profile.tool_calls.append(_tool_call(data))
    elif kind == "replica_counters":
        profile.counters.append({**data, "phase": str(data["phase"]), "model": str(data["model"]),
                                 "replica": str(data["replica"]), "time": float(data["time"])})
    elif kind == "session_move":
        profile.moves.append({**data, "model": str(data["model"]), "reason": str(data.get("reason") or "?")})
    else:
        profile.unknown_types[str(kind)] = profile.unknown_types.get(str(kind), 0) + 1


def _task(data: dict[str, Any]) -> str | None:
    task = data.get("task")
    return None if task is None else str(task)


def _model_call(data: dict[str, Any]) -> ModelCall:
    return ModelCall(role=str(data.get("role") or data["model"]), model=str(data["model"]),
                     replica=data.get("replica"), start=float(data["start"]), latency=float(data["latency"]),
                     prompt_tokens=_int(data.get("prompt_tokens")),
                     completion_tokens=_int(data.get("completion_tokens")),
                     attempts=int(data.get("attempts") or 1), status=str(data.get("status") or "ok"),
                     error=data.get("error"), task=_task(data), cached=data.get("cache") == "hit",
                     cost=None if data.get("cost") is None else float(data["cost"]))


def _tool_call(data: dict[str, Any]) -> ToolCall:
    parts = {key[: -len(PART_SUFFIX)]: float(value) for key, value in data.items()
             if key.endswith(PART_SUFFIX) and key != EXPERT_KEY and isinstance(value, (int, float))
             and not isinstance(value, bool)}
    expert = data.get(EXPERT_KEY)
    return ToolCall(tool=str(data["tool"]), model=data.get("model"), start=float(data["start"]),
                    latency=float(data["latency"]), status=str(data.get("status") or "ok"),
                    expert=None if expert is None else float(expert), parts=parts, task=_task(data),
                    alias=data.get("alias"))


def _int(value: Any) -> int | None:
    return None if value is None else int(value)
