"""What every persona of the simulated engine builds on: the Reply, the answer truths (answer_token, which
tokens a judge grades right), the text of messages, token estimates and the cut at the completion budget.
The personas (agent_rules.py, tau2_rules.py, orchestrator_rules.py, healthbench_rules.py) import this
module; rules.py, which picks the persona that answers a request, imports them (the rules themselves are
written out in rules.py's docstring).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

RIGHT_PERCENT = 60
TOKEN_RE = re.compile(r"sim-[0-9a-f]{8}")
_HLE_QUESTION_RE = re.compile(r"\[question\]:\s*(.*?)\s*\[response\]:", re.DOTALL)

JUDGE_HLE = "judge_hle"
JUDGE_RUBRIC = "judge_rubric"
ORCHESTRATOR = "orchestrator"
EXPERT = "expert"


@dataclass
class Reply:
    """What the model says: text and/or tool calls (each `{"name", "arguments"}` with JSON-string args)."""

    role: str
    content: str | None
    tool_calls: list[dict[str, str]] = field(default_factory=list)
    judge: bool = False
    finish: str | None = None  # set when the answer was cut ("length") or forced by name ("stop")

    @property
    def finish_reason(self) -> str:
        if self.finish is not None:
            return self.finish
        return "tool_calls" if self.tool_calls else "stop"


def _digest(text: str) -> str:
    return hashlib.sha256(" ".join(text.split()).encode()).hexdigest()


def answer_token(question: str) -> str:
    """The answer the sim gives for a question: `sim-` + 8 hex digits of its hash."""
    return "sim-" + _digest(question)[:8]


def token_is_right(token: str) -> bool:
    """Whether a judge grades this answer token as right."""
    return int(token[4:12], 16) % 100 < RIGHT_PERCENT


def answer_is_right(question: str) -> bool:
    """Whether the sim's answer to this question is graded right (about RIGHT_PERCENT % are)."""
    return token_is_right(answer_token(question))


def orchestrator_rounds(question: str) -> int:
    """How many rounds of (non-answer) tool calls the orchestrator makes before answering: 1..3."""
    return 1 + int(_digest(question)[8:10], 16) % 3


def estimate_tokens(text: str) -> int:
    """The documented token estimate: one token per 4 characters, rounded up."""
    return (len(text) + 3) // 4


def message_text(message: Any) -> str:
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content
                         if isinstance(part, dict) and part.get("text") is not None)
    return ""


def question_of(messages: list[Any]) -> str:
    """The text of the first user message ('' if there is none)."""
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "user":
            return message_text(message)
    return ""


def last_user_text(messages: list[Any]) -> str:
    """The text of the last user message ('' if there is none)."""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return message_text(message)
    return ""


def prompt_size(body: dict[str, Any]) -> tuple[int, int]:
    """(characters, estimated tokens) of a chat request's prompt (see the module docstring): the
    characters of every message's text and tool calls, and of the `tools` JSON."""
    messages = body.get("messages") or []
    chars = 0
    for message in messages:
        chars += len(message_text(message))
        if isinstance(message, dict):
            for call in message.get("tool_calls") or ():
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict):
                    chars += len(str(function.get("arguments", ""))) + len(str(function.get("name", "")))
    total = (chars + 3) // 4 + 4 * len(messages)
    tools = body.get("tools")
    if tools:
        tools_chars = len(json.dumps(tools, separators=(",", ":")))
        chars += tools_chars
        total += (tools_chars + 3) // 4
    return chars, total


def prompt_tokens(body: dict[str, Any]) -> int:
    """Estimated prompt tokens of a chat request (see the module docstring)."""
    return prompt_size(body)[1]


def prompt_key(body: dict[str, Any]) -> str:
    """The text the prefix cache (prefix_cache.py) sees of a prompt: its tools, then its messages, as JSON."""
    return json.dumps([body.get("tools"), body.get("messages")], separators=(",", ":"), sort_keys=True)


def completion_tokens(reply: Reply) -> int:
    chars = len(reply.content or "")
    for call in reply.tool_calls:
        chars += len(call["arguments"]) + len(call["name"])
    return max(1, (chars + 3) // 4)


def hermes_text(reply: Reply) -> str:
    """The text a Hermes-style model writes for a reply: its content, then each call as
    `<tool_call>\n{"name": …, "arguments": …}\n</tool_call>` (what vLLM's hermes parser reads back)."""
    parts = [reply.content or ""]
    parts += [f'<tool_call>\n{{"name": "{call["name"]}", "arguments": {call["arguments"]}}}\n</tool_call>'
              for call in reply.tool_calls]
    return "".join(parts)


def fit(reply: Reply, budget: int) -> Reply:
    """The reply as vLLM ends it with room for `budget` completion tokens (max_tokens, or what is left of
    max_model_len after the prompt): unchanged if it fits, else its text (tool calls written out,
    which then no longer parse as calls) cut to `budget` tokens, with finish_reason "length"."""
    if completion_tokens(reply) <= budget:
        return reply
    return Reply(reply.role, hermes_text(reply)[: max(0, budget) * 4], [], reply.judge, finish="length")


def last_token(messages: list[Any], roles: tuple[str, ...] | None = None) -> str | None:
    for message in reversed(messages):
        if roles is not None and (not isinstance(message, dict) or message.get("role") not in roles):
            continue
        found = TOKEN_RE.findall(message_text(message))
        if found:
            return str(found[-1])
    return None


def expert_text(token: str) -> str:
    return ("Let me work through this step by step. I restate the problem, check the relevant facts, "
            "and rule out the alternatives that do not fit.\n"
            f"The final answer is \\boxed{{{token}}}.")


def judge_verdict(messages: list[Any]) -> tuple[bool, str | None]:
    """(right, graded token or None) for a judge request's messages."""
    token = last_token(messages)
    if token is not None:
        return token_is_right(token), token
    prompt = "\n".join(message_text(m) for m in messages)
    match = _HLE_QUESTION_RE.search(prompt)
    question = match.group(1) if match else question_of(messages)
    return answer_is_right(question), None


def malformed(reply: Reply) -> Reply:
    """A judge answer cut off mid-JSON (what `--malformed-rate` serves)."""
    text = reply.content or "{}"
    return Reply(reply.role, text[: max(1, len(text) // 2)], judge=True)
