"""The task context a suite gets for one unit of work: every call goes through the engine.

Model calls are routed by the Fleet (bounded, retried, profiled with this unit's id); tool events
a suite records go to profile.jsonl beside them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from orchestra_ops.client.chat import ChatResult, Message
from orchestra_ops.client.fleet import Fleet
from orchestra_ops.runner.profile import Event, ToolEvent
from orchestra_ops.runner.results import TaskId


class RunContext:
    """What `Suite.run` may call for the unit `task_id` (see runner/suite.py TaskContext)."""

    def __init__(self, fleet: Fleet, task_id: TaskId, on_event: Callable[[Event], None] | None = None,
                 previous: dict[str, Any] | None = None) -> None:
        self.fleet = fleet
        self.task_id = task_id
        self.previous = previous  # this unit's last stored record (a --retry-failed rerun), else None
        self._on_event = on_event

    async def chat(self, name: str, messages: Sequence[Message], **params: Any) -> ChatResult:
        return await self.fleet.chat(name, messages, task=self.task_id, **params)

    def record(self, event: ToolEvent) -> None:
        if self._on_event is not None:
            self._on_event(event)
