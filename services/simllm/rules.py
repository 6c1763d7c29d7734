r"""What the simulated engine answers: pure functions of the request body (no I/O, no randomness).

Tests import these to know the exact answer, and so the exact score, an eval over the sim gets.

Rules
-----
*Text of a message*: its ``content`` (a string, or the ``text`` of each content part joined by
newlines). *The question* of a request is the text of its first ``user`` message.

*Answer token*: ``answer_token(question) = "sim-" + sha256(" ".join(question.split()))[:8]``
(whitespace is collapsed first). A token is *right* iff ``int(token[4:12], 16) % 100 < RIGHT_PERCENT``
(60), so ``answer_is_right(question)`` tells whether the sim will be graded right on a sample, and
about 60 % of samples are. Right or wrong never depends on ``--seed`` (the seed drives faults and
jitter only).

*Role* (first match wins):

1. **judge** when the request text (messages and ``response_format``) mentions
   ``extracted_final_answer`` (HLE judge) or ``criteria_met`` (rubric judge). The HLE verdict is
   ``token_is_right(T)`` for the last answer token ``T`` in the prompt (the graded response, which
   the sim wrote), else ``answer_is_right`` of the HLE ``[question]: …`` block, else of the question.
   HLE: ``{"extracted_final_answer": T or "None", "reasoning": …, "correct": "yes"|"no",
   "confidence": 90|20}``. Rubric: ``{"explanation": …, "criteria_met": true|false}``, one verdict
   per rubric item from T and the item's criterion (rubric_rules.py documents the rule).
   ``--malformed-rate`` makes a judge answer a cut-off, invalid JSON instead.
2. **orchestrator** when the request has ``tools`` and ``tool_choice`` is not ``"none"``. Let
   ``R = orchestrator_rounds(question)`` (1..3) and ``done`` the number of assistant messages
   with ``tool_calls`` so far. While ``done < R`` it calls the non-answer tools in the order given,
   cycling (``tools[done % n]``); then it calls the ``answer`` tool (the first tool whose name
   contains "answer"); with no such tool it answers in text like an expert. A named
   ``tool_choice`` always calls that tool. Arguments follow each tool's JSON schema (required
   properties, else all): an answer-like string property (answer, final_answer, response, content,
   text) gets the answer token, other strings the question (first 200 chars), an enum
   ``enum[(h + done) % len]`` (h from the question's hash), integers 1, numbers 1.0, booleans true,
   arrays [], objects {}.
   The ToolOrchestra agent roles (agent orchestrator, query writer, code writer, answerer, the
   ``<correct>`` judge) are checked next: see ``agent_rules.py``.
3. **benchmark** (``benchmark_gsm8k``, ``benchmark_mmlu``) when the last user message is a gsm8k- or
   mmlu-shaped prompt: the answer, and whether it is right, per persona (the request's ``model``), as
   ``benchmark_rules.py`` documents.
4. **expert** otherwise: a short reasoning text ending ``The final answer is \boxed{T}.`` where T
   is the last answer token already in the prompt (so a token passed along by an orchestrator
   survives), else ``answer_token(question)``.

*Usage*: ``estimate_tokens(text) = ceil(len(text) / 4)``; prompt tokens are the estimate over
every message's text and tool-call arguments, plus 4 per message, plus the ``tools`` JSON.
Completion tokens are the estimate over the answer text and tool-call arguments (at least 1).

*Limits* (as vLLM 0.32): an answer longer than ``max_completion_tokens``/``max_tokens``, or than
what ``max_model_len`` leaves after the prompt, is cut there with finish_reason ``length``
(``fit``). A named ``tool_choice`` ends with finish_reason ``stop``, not ``tool_calls``.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from orchestra_ops.services.simllm import benchmark_rules

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


def classify(body: dict[str, Any]) -> str:
    """The role the sim plays: judge_hle, judge_rubric, orchestrator, benchmark_gsm8k/_mmlu or expert."""
    messages = body.get("messages") or []
    texts = [message_text(m) for m in messages]
    response_format = body.get("response_format")
    if response_format:
        texts.append(json.dumps(response_format))
    for text in texts:
        if "extracted_final_answer" in text:
            return JUDGE_HLE
    for text in texts:
        if "criteria_met" in text:
            return JUDGE_RUBRIC
    from orchestra_ops.services.simllm import agent_rules, tau2_rules

    tau2 = tau2_rules.classify(body, texts)
    if tau2 is not None:
        return tau2
    agent = agent_rules.classify(body, texts)
    if agent is not None:
        return agent
    if body.get("tools") and body.get("tool_choice") != "none":
        return ORCHESTRATOR
    return benchmark_rules.kind(last_user_text(messages)) or EXPERT


def _last_token(messages: list[Any], roles: tuple[str, ...] | None = None) -> str | None:
    for message in reversed(messages):
        if roles is not None and (not isinstance(message, dict) or message.get("role") not in roles):
            continue
        found = TOKEN_RE.findall(message_text(message))
        if found:
            return str(found[-1])
    return None


def respond(body: dict[str, Any]) -> Reply:
    """The sim's deterministic answer to a chat-completions request body."""
    messages = body.get("messages") or []
    role = classify(body)
    if role in (JUDGE_HLE, JUDGE_RUBRIC):
        return _judge(role, messages)
    if role == ORCHESTRATOR:
        from orchestra_ops.services.simllm import orchestrator_rules

        return orchestrator_rules.orchestrate(body, messages)
    if role in benchmark_rules.ROLES:
        return Reply(role, benchmark_rules.answer_text(role, str(body.get("model") or ""), last_user_text(messages)))
    if role != EXPERT:
        from orchestra_ops.services.simllm import agent_rules, tau2_rules

        if role in tau2_rules.ROLES:
            return tau2_rules.respond(role, body)
        return agent_rules.respond(role, body)
    return _expert(messages)


def expert_text(token: str) -> str:
    return ("Let me work through this step by step. I restate the problem, check the relevant facts, "
            "and rule out the alternatives that do not fit.\n"
            f"The final answer is \\boxed{{{token}}}.")


def _expert(messages: list[Any]) -> Reply:
    token = _last_token(messages, ("user", "tool", "system")) or answer_token(question_of(messages))
    return Reply(EXPERT, expert_text(token))


def judge_verdict(messages: list[Any]) -> tuple[bool, str | None]:
    """(right, graded token or None) for a judge request's messages."""
    token = _last_token(messages)
    if token is not None:
        return token_is_right(token), token
    prompt = "\n".join(message_text(m) for m in messages)
    match = _HLE_QUESTION_RE.search(prompt)
    question = match.group(1) if match else question_of(messages)
    return answer_is_right(question), None


def _judge(role: str, messages: list[Any]) -> Reply:
    right, token = judge_verdict(messages)
    if role == JUDGE_HLE:
        verdict: dict[str, Any] = {
            "extracted_final_answer": token or "None",
            "reasoning": ("The extracted answer matches the correct answer." if right
                          else "The extracted answer does not match the correct answer."),
            "correct": "yes" if right else "no",
            "confidence": 90 if right else 20,
        }
    else:
        from orchestra_ops.services.simllm import rubric_rules  # it imports this module

        prompt = "\n".join(message_text(m) for m in messages)
        verdict = rubric_rules.rubric_verdict(prompt, token or answer_token(question_of(messages)))
    return Reply(role, json.dumps(verdict), judge=True)


def malformed(reply: Reply) -> Reply:
    """A judge answer cut off mid-JSON (what `--malformed-rate` serves)."""
    text = reply.content or "{}"
    return Reply(reply.role, text[: max(1, len(text) // 2)], judge=True)
