r"""The sim's parts in τ²-bench (`ops eval tau2`): agent, user simulator and NL judge, as pure rules.

Tests read these to know the exact reward of every simulation. A *directive* is a bracketed token in
a task's user instructions, which the user persona passes on to the agent in its first message:

    [sim:call NAME {json}]       the agent calls tool NAME with these arguments (in order, one per turn;
                                 any JSON object, lists and nesting included)
    [sim:say TEXT]               the agent's closing message includes TEXT
    [sim:agent=parallel]         the agent sends all its calls in one message
    [sim:agent=invalid]          the agent calls `no_such_tool` every turn, forever
    [sim:agent=flaky]            with an odd request `seed` the agent leaves out its last call
    [sim:agent=silent]           the agent's first turn is empty (no text, no tool call)
    [sim:agent=tagged]           the agent's closing text is wrapped: <think>…</think><message>TEXT</message>
    [sim:call call_expert {…}]   an orchestrator offered `call_expert` calls it for the next planned
                                 call (or the closing text); anyone else skips it
    [sim:user_call NAME {json}]  the user calls its own tool NAME first (one per turn)
    [sim:user=never_stop]        the user never stops (it asks another question every turn)
    [sim:user=transfer]          the user ends with ###TRANSFER### instead of ###STOP###

*Roles* (``rules.classify`` checks these first):

1. **tau2 judge**: the messages mention ``metExpectation`` and ``expectedOutcomes:``. The outcomes are
   the list after the last ``expectedOutcomes:`` (JSON, or the Python list repr τ²-bench's own judge
   prompt holds); the conversation is the text between ``conversation:`` and it. An outcome is met
   iff every 'single-quoted' phrase in it occurs (case-insensitive) in an ``assistant:`` line of the
   conversation. Reply
   ``{"results": [{"expectedOutcome", "reasoning", "metExpectation"}]}``.
2. **tau2 user**: a system message holds ``<scenario>``. With U its user_call directives and u the
   tool calls it made so far: while u < |U| it calls U[u]. Then its first text is
   ``"Hi, I need some help. "`` + every agent directive of the scenario, space-separated; every
   later text is ``"Thank you, that is all. ###STOP###"`` (``###TRANSFER###`` with user=transfer),
   or with never_stop ``"Could you tell me more about that?"``.
3. **tau2 agent**: a system message holds ``<policy>`` and the request has tools. P = the call
   directives in the user messages (minus the last with flaky and an odd seed), C = P without its
   ``call_expert`` calls, d = the calls other than ``call_expert`` its assistant messages hold.
   invalid: call ``no_such_tool {}``. silent, d = 0 and no assistant text but the first: an empty
   turn. When ``call_expert`` is offered and the item of P before C[d] (before the end of P when
   d = |C|) is a ``call_expert`` call: that call. parallel and d = 0: all of C in one message.
   d < |C|: call C[d]. Else text: the say directives joined by a space (none: ``"Is there anything
   else I can help with?"``), wrapped with tagged.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from orchestra_ops.services.simllm import replies

TAU2_AGENT = "tau2_agent"
TAU2_USER = "tau2_user"
TAU2_JUDGE = "tau2_judge"
ROLES = frozenset({TAU2_AGENT, TAU2_USER, TAU2_JUDGE})

CALL_HEAD_RE = re.compile(r"\[sim:(call|user_call) (\w+) ")
SAY_RE = re.compile(r"\[sim:say ([^\[\]]*)\]")
FLAG_RE = re.compile(r"\[sim:(agent|user)=(\w+)\]")
AGENT_TEXT_DIRECTIVE_RE = re.compile(r"\[sim:(?:say [^\[\]]*|agent=\w+)\]")
_JSON = json.JSONDecoder()
SCENARIO_RE = re.compile(r"<scenario>(.*?)</scenario>", re.DOTALL)
QUOTED_RE = re.compile(r"'([^']+)'")

FIRST_TEXT = "Hi, I need some help. "
STOP_TEXT = "Thank you, that is all. ###STOP###"
TRANSFER_TEXT = "Thank you. ###TRANSFER###"
MORE_TEXT = "Could you tell me more about that?"
IDLE_TEXT = "Is there anything else I can help with?"
INVALID_TOOL = "no_such_tool"
CALL_EXPERT = "call_expert"


def call_directives(text: str, kind: str = "call") -> list[tuple[str, str, int, int]]:
    """The `[sim:KIND NAME {json}]` directives of `text` (KIND: call or user_call), in order, as (NAME, the
    JSON object's text, start, end); the object is read as JSON, so it may hold lists and nested objects."""
    found = []
    for head in CALL_HEAD_RE.finditer(text):
        if head.group(1) != kind:
            continue
        try:
            value, end = _JSON.raw_decode(text, head.end())
        except ValueError:
            continue
        if isinstance(value, dict) and text.startswith("]", end):
            found.append((head.group(2), text[head.end():end], head.start(), end + 1))
    return found


def agent_directives(scenario: str) -> list[str]:
    """Every agent directive of a scenario (call, say, agent=FLAG), in the order written."""
    spans = [(start, scenario[start:end]) for _, _, start, end in call_directives(scenario)]
    spans += [(m.start(), m.group(0)) for m in AGENT_TEXT_DIRECTIVE_RE.finditer(scenario)]
    return [text for _, text in sorted(spans)]


def _texts(messages: list[Any], role: str) -> list[str]:
    return [replies.message_text(m) for m in messages if isinstance(m, dict) and m.get("role") == role]


def classify(body: dict[str, Any], texts: list[str]) -> str | None:
    messages = body.get("messages") or []
    joined = "\n".join(texts)  # τ²-bench's own judge has metExpectation in its system message
    if "metExpectation" in joined and "expectedOutcomes:" in joined:
        return TAU2_JUDGE
    system = "\n".join(_texts(messages, "system"))
    if "<scenario>" in system:
        return TAU2_USER
    if "<policy>" in system and body.get("tools"):
        return TAU2_AGENT
    return None


def _calls_made(messages: list[Any]) -> int:
    return sum(len(m.get("tool_calls") or ()) for m in messages if isinstance(m, dict) and m.get("role") == "assistant")


def _call(name: str, arguments: str) -> dict[str, str]:
    return {"name": name, "arguments": json.dumps(json.loads(arguments))}


def agent_plan(user_text: str, seed: Any) -> list[dict[str, str]]:
    calls = [_call(name, args) for name, args, _, _ in call_directives(user_text)]
    flags = set(FLAG_RE.findall(user_text))
    if ("agent", "flaky") in flags and isinstance(seed, int) and seed % 2 == 1 and calls:
        calls = calls[:-1]
    return calls


def _offered(body: dict[str, Any]) -> set[str]:
    return {str((t.get("function") or {}).get("name")) for t in body.get("tools") or () if isinstance(t, dict)}


def agent_reply(body: dict[str, Any]) -> replies.Reply:
    messages = body.get("messages") or []
    user_text = "\n".join(_texts(messages, "user"))
    flags = set(FLAG_RE.findall(user_text))
    done = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant"
               for c in m.get("tool_calls") or () if (c.get("function") or {}).get("name") != CALL_EXPERT)
    if ("agent", "invalid") in flags:
        return replies.Reply(TAU2_AGENT, None, [{"name": INVALID_TOOL, "arguments": "{}"}])
    spoken = [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant" and replies.message_text(m)]
    if ("agent", "silent") in flags and done == 0 and len(spoken) <= 1:
        return replies.Reply(TAU2_AGENT, "")
    plan = agent_plan(user_text, body.get("seed"))
    calls = [c for c in plan if c["name"] != CALL_EXPERT]
    if CALL_EXPERT in _offered(body):
        positions = [i for i, c in enumerate(plan) if c["name"] != CALL_EXPERT]
        at = positions[done] if done < len(positions) else len(plan)
        if at > 0 and plan[at - 1]["name"] == CALL_EXPERT:
            return replies.Reply(TAU2_AGENT, None, [plan[at - 1]])
    if ("agent", "parallel") in flags and done == 0 and calls:
        return replies.Reply(TAU2_AGENT, None, calls)
    if done < len(calls):
        return replies.Reply(TAU2_AGENT, None, [calls[done]])
    says = SAY_RE.findall(user_text)
    text = " ".join(says) if says else IDLE_TEXT
    if ("agent", "tagged") in flags:
        text = f"<think>I have done what was asked.</think><message>{text}</message>"
    return replies.Reply(TAU2_AGENT, text)


def user_reply(body: dict[str, Any]) -> replies.Reply:
    messages = body.get("messages") or []
    match = SCENARIO_RE.search("\n".join(_texts(messages, "system")))
    scenario = match.group(1) if match else ""
    own_calls = _calls_made(messages)
    user_calls = [_call(name, args) for name, args, _, _ in call_directives(scenario, "user_call")]
    if own_calls < len(user_calls):
        return replies.Reply(TAU2_USER, None, [user_calls[own_calls]])
    spoken = [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"
              and replies.message_text(m) and not m.get("tool_calls")]
    if not spoken:
        return replies.Reply(TAU2_USER, FIRST_TEXT + " ".join(agent_directives(scenario)))
    flags = set(FLAG_RE.findall(scenario))
    if ("user", "never_stop") in flags:
        return replies.Reply(TAU2_USER, MORE_TEXT)
    return replies.Reply(TAU2_USER, TRANSFER_TEXT if ("user", "transfer") in flags else STOP_TEXT)


def outcome_met(outcome: str, conversation: str) -> bool:
    agent_lines = "\n".join(line for line in conversation.splitlines() if line.startswith("assistant:")).lower()
    return all(phrase.lower() in agent_lines for phrase in QUOTED_RE.findall(outcome))


def _outcome_list(text: str) -> list[Any]:
    """The outcomes as JSON, or as the Python list repr τ²-bench's own judge prompt interpolates."""
    try:
        value = json.loads(text)
    except ValueError:
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return []
    return list(value) if isinstance(value, list) else []


def judge_reply(body: dict[str, Any]) -> replies.Reply:
    text = "\n".join(replies.message_text(m) for m in body.get("messages") or [])
    head, _, tail = text.rpartition("expectedOutcomes:")
    conversation = head.rpartition("conversation:")[2]
    start, end = tail.find("["), tail.rfind("]")
    outcomes = _outcome_list(tail[start:end + 1]) if start >= 0 else []
    results = [{"expectedOutcome": o, "reasoning": "checked against the agent's messages",
                "metExpectation": outcome_met(str(o), conversation)} for o in outcomes]
    return replies.Reply(TAU2_JUDGE, json.dumps({"results": results}), judge=True)


def respond(role: str, body: dict[str, Any]) -> replies.Reply:
    if role == TAU2_JUDGE:
        return judge_reply(body)
    if role == TAU2_USER:
        return user_reply(body)
    return agent_reply(body)
