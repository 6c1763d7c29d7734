"""The `chat` suite: send each sample's prompt to one role or model and store the answer.

Dataset lines: `{"id": …, "prompt": "text" | [{"role": …, "content": …}, …]}`, optionally with
`"params": {…}` (merged into the request, e.g. max_tokens; over --temperature and --max-tokens).
`--model NAME` picks the role or model; with only one declared, it is the default. The smallest real
suite: tests, smoke runs and capacity checks use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestra_ops.client.call_errors import CallError
from orchestra_ops.client.routing import Routing
from orchestra_ops.core.headline import Headline
from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.dataset import Sample, load_dataset
from orchestra_ops.runner.generation import apply_shorthands, generation_options
from orchestra_ops.runner.results import TaskId
from orchestra_ops.runner.suite import BaseSuite, TaskContext, unit_counts


class ChatSuite(BaseSuite):
    """Send each sample's prompt to one role or model and store the answer."""

    name = "chat"
    calls_per_task = 1
    dataset_example = '{"id": "q1", "prompt": "What is the capital of France?"}'
    options = generation_options(evaluated="the model")

    def __init__(self) -> None:
        self.model = ""
        self.params: dict[str, Any] = {}  # --temperature / --max-tokens; a sample's own "params" win

    def load(self, path: Path, *, dedupe: bool) -> list[Sample]:
        """The JSONL lines, each with a `prompt` the suite can send: a dataset of other fields (a `question`)
        is bad input here, before any call, not a run whose every sample fails."""
        samples = load_dataset(path, dedupe=dedupe)
        bad = [s for s in samples if not _sendable(s.get("prompt"))]
        if bad:
            first = bad[0]
            why = (f"sample {first['id']!r} has no \"prompt\" (its fields: {', '.join(map(str, first))})"
                   if "prompt" not in first else f"sample {first['id']!r} has a \"prompt\" that is neither text "
                   "nor a list of {role, content} messages")
            raise ConfigError(f"{path}: {len(bad)} of {len(samples)} samples cannot be sent: {why}; the chat suite "
                              f"reads JSONL lines like {self.dataset_example}")
        return samples

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
        self.params = apply_shorthands({}, options)
        return [self.model]

    async def run(self, sample: Sample, ctx: TaskContext) -> dict[str, Any]:
        messages = to_messages(sample.get("prompt"))
        raw = sample.get("params")
        params: dict[str, Any] = {**self.params, **(raw if isinstance(raw, dict) else {})}
        result = await ctx.chat(self.model, messages, **params)
        return {"answer": result.content, "finish_reason": result.finish_reason,
                "usage": {"prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens},
                "replica": result.replica, "attempts": result.attempts}

    def score(self, records: Mapping[TaskId, dict[str, Any]], units: list[Sample]) -> dict[str, Any] | None:
        """The chat suite grades nothing: scores.json says how many prompts were answered."""
        return {"suite": self.name, "model": self.model, **unit_counts(records, units)}

    def headline(self, scores: Mapping[str, Any], records: Mapping[TaskId, dict[str, Any]],
                 units: list[Sample]) -> Headline | None:
        return Headline(metric="answered", note=f"{scores['ok']}/{scores['units']} answered, not graded")

    def score_lines(self, scores: Mapping[str, Any]) -> list[str]:
        return [f"answered {scores['ok']} of {scores['units']} prompts ({scores['failed']} failed, "
                f"{scores['missing']} without a result)"]


def _sendable(prompt: Any) -> bool:
    return isinstance(prompt, str) or (isinstance(prompt, list) and bool(prompt)
                                       and all(isinstance(m, dict) and "role" in m for m in prompt))


def to_messages(prompt: Any) -> list[dict[str, Any]]:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if isinstance(prompt, list) and prompt and all(isinstance(m, dict) and "role" in m for m in prompt):
        return prompt
    raise CallError("bad_sample", "\"prompt\" must be a string or a list of {role, content} messages")
