"""What the code running in an asyncio task is doing, for observers (the stall watchdog).

`current_task`: the unit of work (set by the engine around each task); `current_role`: the role or
model key of the model call being made (set by ModelClient for the length of one call);
`current_session`: the session key of the calls being made (a multi-round unit of work: an agent
task, one side of a tau2 simulation, a HealthBench example), set by the suite through its task
context (`ctx.session(key)`); ModelClient sends it to the pool (affinity) and as `x-session-id`.
Context variables are copied into child tasks, so a suite's own gather() keeps its unit's id.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

current_task: ContextVar[str | int | None] = ContextVar("ops_current_task", default=None)
current_role: ContextVar[str | None] = ContextVar("ops_current_role", default=None)
current_session: ContextVar[str | None] = ContextVar("ops_current_session", default=None)


@contextlib.contextmanager
def session_scope(key: str | None) -> Iterator[None]:
    """The model calls made inside the block carry session `key` (None: no session)."""
    token = current_session.set(key)
    try:
        yield
    finally:
        current_session.reset(token)
