"""One simulation: agent <-> user simulator <-> environment, half-duplex (reference §1.5-1.6).

The trajectory starts with the agent's fixed greeting, routed to the user simulator, which speaks
first. Each step is one hop: a user turn, an agent turn, or the batch of results of the tool calls
of the last message (run in order; an exception is `Error: …` with error=True and counts toward
max_errors; results go back to the caller). A user turn holding `###STOP###`, `###TRANSFER###` or
`###OUT-OF-SCOPE###` (anywhere in its text) ends the episode with `user_stop`. After every step,
unless a tool result is pending, `max_steps` (steps so far) and `max_errors` (failed tool calls in
all) are checked, in that order, the latter winning. The agent sees user text and its own tool
results; the user sees agent text only (roles flipped) and its own tool results. An agent message
with both text and tool calls goes to the environment (its text never reaches the user).

A turn with neither text nor tool calls ends the episode (`agent_error` / `user_error`), except
under `--protocol toolorchestra` (toolorchestra.py: call_expert, the hidden transfer tool, the
history budget), where an empty agent turn becomes the filler "Wait a minute, …".
A model call that fails after its retries raises CallError: the caller records an infrastructure
error (left out of the metrics) with the trajectory so far.
"""

from __future__ import annotations

import datetime
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestra_ops.evals.tau2 import toolorchestra
from orchestra_ops.evals.tau2.domain import Env

from orchestra_ops.client.callctx import session_scope
from orchestra_ops.client.chat import ChatResult
from orchestra_ops.runner.suite import TaskContext

GREETING = "Hi! How can I help you today?"
STOP_TOKENS = ("###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###")
AGENT, USER, ENV = "agent", "user", "env"


@dataclass
class LoopSettings:
    agent: str  # the role or model playing the agent
    user: str  # the role or model playing the user simulator
    agent_system: str
    user_system: str
    agent_tools: list[dict[str, Any]]
    user_tools: list[dict[str, Any]]
    agent_params: dict[str, Any]
    user_params: dict[str, Any]
    max_steps: int
    max_errors: int
    protocol: str = "tau2"
    experts: dict[str, str] = field(default_factory=dict)  # toolorchestra: alias -> role or model
    expert_params: dict[str, Any] = field(default_factory=dict)
    history_budget: int = toolorchestra.HISTORY_BUDGET


@dataclass
class Simulation:
    messages: list[dict[str, Any]] = field(default_factory=list)
    step_count: int = 0
    num_errors: int = 0
    termination: str | None = None
    agent_calls: int = 0
    user_calls: int = 0
    expert_calls: int = 0
    started: float = field(default_factory=time.time)
    token_cache: dict[int, int] = field(default_factory=dict)  # agent-view message index -> tokens


def now() -> str:
    return datetime.datetime.now().isoformat()


def _message(role: str, content: str | None, calls: list[dict[str, Any]], reply: ChatResult | None
             ) -> dict[str, Any]:
    message: dict[str, Any] = {"role": role, "content": content, "tool_calls": calls or None, "timestamp": now()}
    if reply is not None:
        message["usage"] = {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens}
        message["raw_data"] = {"replica": reply.replica, "finish_reason": reply.finish_reason}
    return message


def parse_reply(reply: ChatResult, requestor: str, prefix: str) -> tuple[str | None, list[dict[str, Any]]]:
    """(text or None, tool calls as τ²-bench's ToolCall dicts); unparseable arguments become {} and are
    marked `invalid_arguments` (the environment then answers with an error)."""
    content = reply.content if reply.content and reply.content.strip() else None
    calls = []
    for index, raw in enumerate(reply.message.get("tool_calls") or ()):
        function = raw.get("function") or {}
        text = function.get("arguments")
        call: dict[str, Any] = {"id": str(raw.get("id") or f"{prefix}{index}"), "name": str(function.get("name")),
                                "arguments": {}, "requestor": requestor}
        try:
            parsed = json.loads(text) if isinstance(text, str) and text.strip() else (text or {})
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            call["arguments"] = parsed
        else:
            call["invalid_arguments"] = text
        calls.append(call)
    return content, calls


def _openai_call(call: dict[str, Any]) -> dict[str, Any]:
    return {"id": call["id"], "type": "function",
            "function": {"name": call["name"], "arguments": json.dumps(call.get("arguments") or {})}}


def agent_view(system: str, messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    view: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for m in messages:
        if m["role"] == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": m.get("content")}
            if m.get("tool_calls"):
                entry["tool_calls"] = [_openai_call(c) for c in m["tool_calls"]]
            view.append(entry)
        elif m["role"] == "user" and not m.get("tool_calls"):
            view.append({"role": "user", "content": m.get("content")})
        elif m["role"] == "tool" and m.get("requestor") == "assistant":
            view.append({"role": "tool", "tool_call_id": m["id"], "content": m["content"]})
    return view


def user_view(system: str, messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    view: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for m in messages:
        if m["role"] == "assistant" and m.get("content") and not m.get("tool_calls"):
            view.append({"role": "user", "content": m["content"]})
        elif m["role"] == "user":
            entry: dict[str, Any] = {"role": "assistant", "content": m.get("content")}
            if m.get("tool_calls"):
                entry["tool_calls"] = [_openai_call(c) for c in m["tool_calls"]]
            view.append(entry)
        elif m["role"] == "tool" and m.get("requestor") == "user":
            view.append({"role": "tool", "tool_call_id": m["id"], "content": m["content"]})
    return view


def is_stop(content: str | None) -> bool:
    return bool(content) and any(token in str(content) for token in STOP_TOKENS)


async def simulate(env: Env, ctx: TaskContext, settings: LoopSettings, sim: Simulation) -> Simulation:
    """Run until a termination reason is set; `sim` is filled in as it goes (the caller keeps it when a
    call fails or the deadline cancels this)."""
    greeting = _message("assistant", GREETING, [], None)
    sim.messages.append(greeting)
    from_role, to_role = AGENT, USER
    pending: dict[str, Any] = greeting
    while sim.termination is None:
        if to_role == USER:
            with session_scope(side_session(ctx, USER)):
                reply = await ctx.chat(settings.user, user_view(settings.user_system, sim.messages),
                                       **({"tools": settings.user_tools} if settings.user_tools else {}),
                                       **settings.user_params)
            sim.user_calls += 1
            content, calls = parse_reply(reply, "user", f"user_call_{len(sim.messages)}_")
            calls = unique_ids(calls, sim.messages)
            pending = _message("user", content, calls, reply)
            sim.messages.append(pending)
            if content is None and not calls:
                sim.termination = "user_error"
                break
            if is_stop(content):
                sim.termination = "user_stop"
            from_role, to_role = USER, (ENV if calls else AGENT)
        elif to_role == AGENT:
            if settings.protocol == "toolorchestra":
                with session_scope(side_session(ctx, AGENT)):
                    turn, reply = await orchestrator_turn(ctx, settings, sim)
                content, calls = turn.content, turn.calls
            else:
                with session_scope(side_session(ctx, AGENT)):
                    reply = await ctx.chat(settings.agent, agent_view(settings.agent_system, sim.messages),
                                           tools=settings.agent_tools, **settings.agent_params)
                sim.agent_calls += 1
                content, calls = parse_reply(reply, "assistant", f"call_{len(sim.messages)}_")
            calls = unique_ids(calls, sim.messages)
            pending = _message("assistant", content, calls, reply)
            if settings.protocol == "toolorchestra":
                pending["raw_data"].update(expert=turn.expert, history_cut=turn.cut)
            sim.messages.append(pending)
            if content is None and not calls:
                sim.termination = "agent_error"
                break
            from_role, to_role = AGENT, (ENV if calls else USER)
        else:
            for call in pending["tool_calls"] or ():
                if "invalid_arguments" in call:
                    content, error = "Error: the arguments are not a JSON object", True
                else:
                    content, error = env.call(call["name"], call["arguments"], call["requestor"])
                sim.num_errors += error
                sim.messages.append({"id": call["id"], "role": "tool", "content": content,
                                     "requestor": call["requestor"], "error": error, "timestamp": now()})
            from_role, to_role = ENV, from_role
        sim.step_count += 1
        if to_role == ENV:
            continue
        if sim.step_count >= settings.max_steps:
            sim.termination = "max_steps"
        if sim.num_errors >= settings.max_errors:
            sim.termination = "too_many_errors"
    for index, message in enumerate(sim.messages):
        message["turn_idx"] = index
    return sim


def side_session(ctx: TaskContext, side: str) -> str:
    """The session key of one side of the simulation: the agent and the user simulator each see their
    own growing history (agent_view, user_view), so each keeps its own replica's prefix cache."""
    return f"{ctx.task_id}/{side}"


def unique_ids(calls: list[dict[str, Any]], messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool-call ids unique within the simulation (a result is paired with its call by id; some servers
    number calls per response, e.g. call_0, so a repeated id gets a suffix)."""
    seen = {c["id"] for m in messages for c in m.get("tool_calls") or ()}
    for call in calls:
        base, n = call["id"], 1
        while call["id"] in seen:
            call["id"] = f"{base}-{n}"
            n += 1
        seen.add(call["id"])
    return calls


async def orchestrator_turn(ctx: TaskContext, settings: LoopSettings, sim: Simulation
                            ) -> tuple[toolorchestra.Turn, ChatResult]:
    """One agent turn under --protocol toolorchestra (see toolorchestra.py)."""
    view = agent_view(settings.agent_system, sim.messages)
    tools = toolorchestra.orchestrator_tools(settings.agent_tools, list(settings.experts))
    count = ctx.tokenizer(settings.agent).count
    budget = settings.history_budget - await count(json.dumps(tools))
    sent = await toolorchestra.cut_history(view, budget, count, sim.token_cache)
    reply = await ctx.chat(settings.agent, sent, tools=tools, **settings.agent_params)
    sim.agent_calls += 1
    content, calls = parse_reply(reply, "assistant", "")
    turn = toolorchestra.Turn(toolorchestra.clean_text(content), toolorchestra.limit_calls(calls),
                              cut=len(view) - len(sent))
    expert = toolorchestra.expert_of(turn.calls, list(settings.experts))
    if expert is not None:
        reply = await ctx.chat(settings.experts[expert], view, tools=settings.agent_tools, **settings.expert_params)
        sim.expert_calls += 1
        content, calls = parse_reply(reply, "assistant", "")
        turn = toolorchestra.Turn(toolorchestra.clean_text(content), toolorchestra.limit_calls(calls), expert,
                                  turn.cut)
    if turn.content is None and not turn.calls:
        turn.content = toolorchestra.FILLER
    return turn, reply
