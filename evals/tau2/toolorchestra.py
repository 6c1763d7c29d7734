"""`--protocol toolorchestra`: the agent turn as ToolOrchestra's τ²-bench runs make it (reference §2.3).

- Tools: the domain's agent tools without `transfer_to_human_agents` (hidden from the list, still
  executed when the model names it), plus `call_expert(expert)` over the aliases expert-1..3, each
  routed like hle's tool aliases (`--alias expert-1=ROLE`, else the topology's `aliases:`, else a
  role of the alias's own name).
- History budget: the messages sent keep a head and a tail of whole messages (the system prompt
  always) so each half counts at most (budget - tokens of the tools JSON) / 2 tokens of the agent's
  tokenizer; the middle is left out. (Our own cut; the original searches markers in one tokenized
  string, with the same intent.)
- Parsing: the text after the last `</think>`; inside `<message>…</message>` when present; at
  most 6 tool calls. An empty turn becomes FILLER. Never its infinite retries: calls are bounded
  by the engine like any other.
- Expert delegation: a `call_expert` call naming a known alias hands the turn to that expert (the
  original tool list, transfer included, and the same messages); its text and tool calls replace
  the orchestrator's, and the `call_expert` call is not kept. An unknown alias leaves the call in
  place: the environment answers "Tool 'call_expert' not found." (an error toward max_errors).
Deliberate differences: no name-dependent system-prompt rewrite (replace the `agent_system`
template instead), and the prices of its tool description are not reproduced.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

EXPERTS = ("expert-1", "expert-2", "expert-3")
HIDDEN_TOOL = "transfer_to_human_agents"
CALL_EXPERT = "call_expert"
FILLER = "Wait a minute, I will take it very soon"
MAX_TOOL_CALLS = 6
HISTORY_BUDGET = 23000
DEFAULT_SAMPLING = {"temperature": 1.0, "max_tokens": 8000}
_MESSAGE = re.compile(r"<message>(.*?)</message>", re.DOTALL)


def call_expert_schema(experts: Sequence[str] = EXPERTS) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": CALL_EXPERT,
        "description": "Hand this turn to an expert model when it can serve the user better than the other "
                       f"tools. Choices: {', '.join(experts)}; a stronger expert costs more and answers slower.",
        "parameters": {"type": "object", "properties": {"expert": {
            "type": "string", "description": f"One of {', '.join(experts)}."}}, "required": ["expert"]}}}


def orchestrator_tools(agent_tools: Sequence[dict[str, Any]], experts: Sequence[str] = EXPERTS
                       ) -> list[dict[str, Any]]:
    kept = [t for t in agent_tools if t["function"]["name"] != HIDDEN_TOOL]
    return [*kept, call_expert_schema(experts)]


def clean_text(text: str | None) -> str | None:
    """The text after the last `</think>`, the inside of `<message>…</message>` when present; None if empty."""
    if not text:
        return None
    body = text.rsplit("</think>", 1)[-1]
    found = _MESSAGE.search(body)
    if found:
        body = found.group(1)
    body = body.strip()
    return body or None


async def cut_history(messages: list[dict[str, Any]], budget: int, count: Callable[[str], Awaitable[int]],
                      cache: dict[int, int]) -> list[dict[str, Any]]:
    """Head and tail of whole messages, each within budget // 2 tokens (the first message always kept).
    `cache` keeps each message's count by its position (messages never change once sent)."""
    sizes = []
    for index, message in enumerate(messages):
        if index not in cache:
            cache[index] = await count(json.dumps(message, ensure_ascii=False))
        sizes.append(cache[index])
    if sum(sizes) <= budget:
        return list(messages)
    half = max(0, budget // 2)
    head_end, used = 1, sizes[0]
    while head_end < len(messages) and used + sizes[head_end] <= half:
        used += sizes[head_end]
        head_end += 1
    tail_start, used = len(messages), 0
    while tail_start - 1 >= head_end and used + sizes[tail_start - 1] <= half:
        tail_start -= 1
        used += sizes[tail_start]
    return [*messages[:head_end], *messages[tail_start:]]


@dataclass
class Turn:
    content: str | None
    calls: list[dict[str, Any]]
    expert: str | None = None  # the alias the turn was handed to
    cut: int = 0  # messages left out of the orchestrator's request


def limit_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """At most MAX_TOOL_CALLS calls, each with a fresh id."""
    return [{**call, "id": f"call_{uuid.uuid4().hex[:24]}"} for call in calls[:MAX_TOOL_CALLS]]


def expert_of(calls: Sequence[dict[str, Any]], experts: Sequence[str]) -> str | None:
    for call in calls:
        if call["name"] == CALL_EXPERT and (call.get("arguments") or {}).get("expert") in experts:
            return str(call["arguments"]["expert"])
    return None
