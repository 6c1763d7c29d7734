"""The `chat` suite: send each sample's prompt to one role or model and store the answer.

Dataset lines: `{"id": …, "prompt": "text" | [{"role": …, "content": …}, …]}`, optionally with
`"params": {…}` (merged into the request, e.g. max_tokens). `--model NAME` picks the role or
model; with only one declared, it is the default. The smallest real suite: tests, smoke runs and
capacity checks use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestra_ops.client.call_errors import CallError
from orchestra_ops.client.routing import Routing
from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.dataset import Sample
from orchestra_ops.runner.results import TaskId
from orchestra_ops.runner.suite import BaseSuite, TaskContext, unit_counts


class ChatSuite(BaseSuite):
    """Send each sample's prompt to one role or model and store the answer."""

    name = "chat"
    calls_per_task = 1

    def __init__(self) -> None:
        self.model = ""

    def prepare(self, routing: Routing, options: Mapping[str, Any]) -> list[str]:
        if len(options.get("models") or ()) > 1:
            raise ConfigError("the chat suite sends each prompt to one --model; give it once")
        model = options.get("model")
        if not model:
            chat_roles = [r for r, key in routing.roles.items() if routing.targets[key].kind != "service"]
            if len(chat_roles) != 1:
                raise ConfigError(f"the chat suite needs --model ROLE_OR_MODEL (roles: {', '.join(chat_roles)})")
            model = chat_roles[0]
        routing.chat_target(str(model))
        self.model = str(model)
        return [self.model]

    async def run(self, sample: Sample, ctx: TaskContext) -> dict[str, Any]:
        messages = to_messages(sample.get("prompt"))
        raw = sample.get("params")
        params: dict[str, Any] = raw if isinstance(raw, dict) else {}
        result = await ctx.chat(self.model, messages, **params)
        return {"answer": result.content, "finish_reason": result.finish_reason,
                "usage": {"prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens},
                "replica": result.replica, "attempts": result.attempts}

    def score(self, records: Mapping[TaskId, dict[str, Any]], units: list[Sample]) -> dict[str, Any] | None:
        """The chat suite grades nothing: scores.json says how many prompts were answered."""
        return {"suite": self.name, "model": self.model, **unit_counts(records, units)}

    def score_lines(self, scores: Mapping[str, Any]) -> list[str]:
        return [f"answered {scores['ok']} of {scores['units']} prompts ({scores['failed']} failed, "
                f"{scores['missing']} without a result)"]


def to_messages(prompt: Any) -> list[dict[str, Any]]:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if isinstance(prompt, list) and prompt and all(isinstance(m, dict) and "role" in m for m in prompt):
        return prompt
    raise CallError("bad_sample", "\"prompt\" must be a string or a list of {role, content} messages")
