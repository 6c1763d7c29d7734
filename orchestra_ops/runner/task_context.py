"""The task context a suite gets for one unit of work: every call goes through the engine.

Model calls are routed by the FleetClient (bounded, retried, profiled with this unit's id); retrieval,
code execution and token counting go through the run's Toolbox (bounded retries, the sandbox's
worker bound, the model's own tokenizer); tool events a suite records go to profile.jsonl.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from orchestra_ops.client.callctx import current_session
from orchestra_ops.client.chat import ChatResult, Message
from orchestra_ops.client.fleet_client import FleetClient
from orchestra_ops.client.retrieval import RetrievalResult, RetrievalSettings
from orchestra_ops.client.tokenizer import Tokenizer
from orchestra_ops.runner.profile import Event, ToolEvent
from orchestra_ops.runner.results import TaskId
from orchestra_ops.runner.toolbox import Toolbox
from orchestra_ops.sandbox import ExecResult, SandboxPolicy


class RunContext:
    """What `Suite.run` may call for the unit `task_id` (see runner/suite.py TaskContext)."""

    def __init__(self, fleet: FleetClient, task_id: TaskId, on_event: Callable[[Event], None] | None = None,
                 previous: dict[str, Any] | None = None, toolbox: Toolbox | None = None) -> None:
        self.fleet = fleet
        self.task_id = task_id
        self.previous = previous  # this unit's last stored record (a --retry-failed rerun), else None
        self._on_event = on_event
        self.toolbox = toolbox or Toolbox(fleet)
        self.sessions: set[str] = set()  # the session keys this unit's calls carried (callctx.session_scope)

    async def chat(self, name: str, messages: Sequence[Message], **params: Any) -> ChatResult:
        session = current_session.get()
        if session is not None:
            self.sessions.add(session)
        return await self.fleet.chat(name, messages, task=self.task_id, session=session, **params)

    def end(self) -> None:
        """The unit is done (or stopped): the pools forget its sessions, so their tables stay bounded."""
        for session in self.sessions:
            self.fleet.end_session(session)
        self.sessions.clear()

    def record(self, event: ToolEvent) -> None:
        if self._on_event is not None:
            self._on_event(event)

    async def retrieve(self, services: Sequence[str], query: str, *, topk: int, eid: Any,
                       settings: RetrievalSettings | None = None) -> RetrievalResult:
        """POST /retrieve on the first of `services` that answers (never raises: see RetrievalResult.error)."""
        return await self.toolbox.retrieve(services, query, topk=topk, eid=eid, settings=settings)

    async def execute(self, code: str, policy: SandboxPolicy | None = None) -> ExecResult:
        """Run model-written code in the sandbox (never in this process)."""
        return await self.toolbox.execute(code, policy)

    def tokenizer(self, name: str) -> Tokenizer:
        """The tokenizer of the model a role or model key resolves to (for context budgets)."""
        return self.toolbox.tokenizer(name)
