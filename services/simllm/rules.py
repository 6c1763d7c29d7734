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
   per rubric item from T and the item's criterion (healthbench_rules.py documents the rule).
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
   ``opencompass_rules.py`` documents.
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

import json
from typing import Any

from orchestra_ops.services.simllm import (
    agent_rules,
    healthbench_rules,
    opencompass_rules,
    orchestrator_rules,
    tau2_rules,
)
from orchestra_ops.services.simllm.replies import (
    EXPERT,
    JUDGE_HLE,
    JUDGE_RUBRIC,
    ORCHESTRATOR,
    Reply,
    answer_token,
    expert_text,
    judge_verdict,
    last_token,
    last_user_text,
    message_text,
    question_of,
)


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
    tau2 = tau2_rules.classify(body, texts)
    if tau2 is not None:
        return tau2
    agent = agent_rules.classify(body, texts)
    if agent is not None:
        return agent
    if body.get("tools") and body.get("tool_choice") != "none":
        return ORCHESTRATOR
    return opencompass_rules.kind(last_user_text(messages)) or EXPERT


def respond(body: dict[str, Any]) -> Reply:
    """The sim's deterministic answer to a chat-completions request body."""
    messages = body.get("messages") or []
    role = classify(body)
    if role in (JUDGE_HLE, JUDGE_RUBRIC):
        return _judge(role, messages)
    if role == ORCHESTRATOR:
        return orchestrator_rules.orchestrate(body, messages)
    if role in opencompass_rules.ROLES:
        return Reply(role, opencompass_rules.answer_text(role, str(body.get("model") or ""), last_user_text(messages)))
    if role != EXPERT:
        if role in tau2_rules.ROLES:
            return tau2_rules.respond(role, body)
        return agent_rules.respond(role, body)
    return _expert(messages)


def _expert(messages: list[Any]) -> Reply:
    token = last_token(messages, ("user", "tool", "system")) or answer_token(question_of(messages))
    return Reply(EXPERT, expert_text(token))


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
        prompt = "\n".join(message_text(m) for m in messages)
        verdict = healthbench_rules.rubric_verdict(prompt, token or answer_token(question_of(messages)))
    return Reply(role, json.dumps(verdict), judge=True)
