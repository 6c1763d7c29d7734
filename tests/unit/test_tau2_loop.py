"""The tau2 loop's hop accounting against the sim's rules, in process (no HTTP): τ²-bench HEAD checks
the limits after a user stop too, so a stop on the last allowed step ends as max_steps."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from orchestra_ops.evals.tau2.environment import base_env, get_domain
from orchestra_ops.evals.tau2.loop import GREETING, LoopSettings, Simulation, simulate
from orchestra_ops.evals.tau2.tasks import load_domain_data
from orchestra_ops.services.simllm import rules, tau2_rules

from orchestra_ops.client.chat import ChatResult
from tests.integration.tau2_fixtures import SYNTHETIC


class CharTokenizer:
    """One token per 4 characters, rounded up (the sim's documented estimate)."""

    description = "chars / 4"

    async def count(self, text: str) -> int:
        return (len(text) + 3) // 4


class SimContext:
    task_id = "t"
    previous = None

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def tokenizer(self, name: str) -> CharTokenizer:
        return CharTokenizer()

    async def chat(self, name: str, messages: Sequence[Any], **params: Any) -> ChatResult:
        body = {"messages": [dict(m) for m in messages], "model": name, **params}
        self.bodies.append(body)
        reply = rules.respond(body)
        calls = [{"id": f"c{len(self.bodies)}-{i}", "type": "function",
                  "function": {"name": c["name"], "arguments": c["arguments"]}} for i, c in enumerate(reply.tool_calls)]
        return ChatResult(reply.content, {"role": "assistant", "content": reply.content, "tool_calls": calls},
                          reply.finish_reason, 1, 1, "local", 1, 0.0)


def _settings(scenario: str, max_steps: int = 200, max_errors: int = 10) -> LoopSettings:
    domain = get_domain("synthetic")
    return LoopSettings(agent="agent", user="user", agent_system="<policy>\nbe nice\n</policy>",
                        user_system=f"play a user\n<scenario>\n{scenario}\n</scenario>",
                        agent_tools=domain.agent_schemas(), user_tools=domain.user_schemas(), agent_params={},
                        user_params={}, max_steps=max_steps, max_errors=max_errors)


def _run(scenario: str, **limits: int) -> tuple[Simulation, SimContext]:
    data = load_domain_data(SYNTHETIC, "synthetic")
    env = base_env(get_domain("synthetic"), data)
    ctx = SimContext()
    sim = asyncio.run(simulate(env, ctx, _settings(scenario, **limits), Simulation()))  # type: ignore[arg-type]
    return sim, ctx


def test_a_plain_episode_and_what_each_side_sees() -> None:
    sim, ctx = _run('[sim:call find_member_by_email {"email":"ada.park@example.com"}] [sim:say Found you.]')
    roles = [(m["role"], bool(m.get("tool_calls"))) for m in sim.messages]
    assert roles == [("assistant", False), ("user", False), ("assistant", True), ("tool", False),
                     ("assistant", False), ("user", False)]
    assert sim.messages[0]["content"] == GREETING and sim.messages[3]["content"] == "m100"
    assert sim.messages[4]["content"] == "Found you." and sim.messages[5]["content"] == tau2_rules.STOP_TEXT
    assert (sim.termination, sim.step_count, sim.num_errors) == ("user_stop", 5, 0)
    last_user_request = [b for b in ctx.bodies if b["model"] == "user"][-1]["messages"]
    # the user saw the greeting and the agent's text as "user" turns, its own turn as "assistant", no tool traffic
    assert [m["role"] for m in last_user_request] == ["system", "user", "assistant", "user"]
    last_agent_request = [b for b in ctx.bodies if b["model"] == "agent"][-1]["messages"]
    assert [m["role"] for m in last_agent_request] == ["system", "assistant", "user", "assistant", "tool"]


def test_a_stop_on_the_last_allowed_step_ends_as_max_steps() -> None:
    sim, _ = _run("[sim:say hi]", max_steps=3)
    assert [m["role"] for m in sim.messages] == ["assistant", "user", "assistant", "user"]
    assert "###STOP###" in sim.messages[-1]["content"]
    assert (sim.termination, sim.step_count) == ("max_steps", 3)
    sim, _ = _run("[sim:say hi]", max_steps=4)
    assert (sim.termination, sim.step_count) == ("user_stop", 3)


def test_errors_are_counted_in_all_and_checked_after_the_results() -> None:
    sim, _ = _run('[sim:agent=parallel] [sim:call no_such_tool {}] [sim:call book_class {"member_id":"m1"}] '
                  '[sim:call list_classes {}]', max_errors=2)
    tools = [m for m in sim.messages if m["role"] == "tool"]
    assert [m["error"] for m in tools] == [True, True, False]  # the whole batch runs, in order
    assert tools[1]["content"] == "Error: book_class: missing argument(s) class_id"
    assert (sim.termination, sim.num_errors, sim.step_count) == ("too_many_errors", 2, 3)


def test_repeated_tool_call_ids_are_made_unique_within_a_simulation() -> None:
    from orchestra_ops.evals.tau2.loop import unique_ids

    earlier = [{"role": "assistant", "tool_calls": [{"id": "call_0"}]}]
    calls = [{"id": "call_0"}, {"id": "call_0"}, {"id": "call_1"}]
    assert [c["id"] for c in unique_ids(calls, earlier)] == ["call_0-1", "call_0-2", "call_1"]
