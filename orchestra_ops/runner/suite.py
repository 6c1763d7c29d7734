"""The interface an eval suite implements (suites live in evals/ and register in evals/registry.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from orchestra_ops.client.chat import ChatResult, Message
from orchestra_ops.client.routing import Routing
from orchestra_ops.runner.dataset import Sample


class TaskContext(Protocol):
    """What a suite may call: only names the routing declares (roles, models, providers)."""

    async def chat(self, name: str, messages: Sequence[Message], **params: Any) -> ChatResult: ...


class Suite(Protocol):
    name: str
    default_dataset: str | None  # used when --dataset is not given (None: --dataset is required)
    calls_per_task: int  # the most model calls one task makes (sets the default task deadline)

    def prepare(self, routing: Routing, options: Mapping[str, Any]) -> list[str]:
        """Check options against the routing; return every role/model name the run will call."""
        ...

    async def run(self, sample: Sample, ctx: TaskContext) -> dict[str, Any]:
        """Run one sample; return the fields stored with it. A failed call raises CallError."""
        ...
