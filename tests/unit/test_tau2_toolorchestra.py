"""`--protocol toolorchestra` in process against the sim's rules: call_expert delegation, the hidden
transfer tool, an unknown expert counted as an error, the filler, <think>/<message> parsing, the
history budget."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

from orchestra_ops.evals.tau2 import toolorchestra
from orchestra_ops.evals.tau2.environment import base_env, get_domain
from orchestra_ops.evals.tau2.loop import Simulation, simulate
from orchestra_ops.evals.tau2.tasks import load_domain_data

from tests.integration.tau2_fixtures import SYNTHETIC
from tests.unit.test_tau2_loop import SimContext, _settings

EXPERTS = {"expert-1": "strong", "expert-2": "cheap", "expert-3": "small"}
FIND = '[sim:call find_member_by_email {"email":"ada.park@example.com"}]'
BOOK = '[sim:call book_class {"member_id":"m100","class_id":"c3"}]'


def _run(scenario: str, protocol: str = "toolorchestra", **overrides: Any) -> tuple[Simulation, SimContext]:
    data = load_domain_data(SYNTHETIC, "synthetic")
    env = base_env(get_domain("synthetic"), data)
    ctx = SimContext()
    settings = dataclasses.replace(_settings(scenario), protocol=protocol, experts=EXPERTS, **overrides)
    sim = asyncio.run(simulate(env, ctx, settings, Simulation()))  # type: ignore[arg-type]
    return sim, ctx


def _names(tools: list[dict[str, Any]]) -> set[str]:
    return {t["function"]["name"] for t in tools}


def test_call_expert_hands_the_turn_to_the_expert_and_is_not_kept() -> None:
    sim, ctx = _run(f'{FIND} [sim:call call_expert {{"expert":"expert-2"}}] {BOOK} [sim:say Booked.]')
    calls = [(m["tool_calls"][0]["name"], m["raw_data"]["expert"]) for m in sim.messages if m.get("tool_calls")]
    assert calls == [("find_member_by_email", None), ("book_class", "expert-2")]
    assert (sim.termination, sim.agent_calls, sim.expert_calls, sim.num_errors) == ("user_stop", 3, 1, 0)
    orchestrator = [b for b in ctx.bodies if b["model"] == "agent"]
    expert = [b for b in ctx.bodies if b["model"] == "cheap"]
    assert len(orchestrator) == 3 and len(expert) == 1
    assert "call_expert" in _names(orchestrator[0]["tools"]) and "transfer_to_human_agents" not in _names(
        orchestrator[0]["tools"])
    assert "transfer_to_human_agents" in _names(expert[0]["tools"]) and "call_expert" not in _names(expert[0]["tools"])
    assert expert[0]["messages"] == orchestrator[1]["messages"]  # the same history (uncut here)
    assert all(c["id"].startswith("call_") for m in sim.messages for c in m.get("tool_calls") or ())


def test_the_hidden_transfer_tool_still_runs_and_an_unknown_expert_is_an_error() -> None:
    sim, _ = _run('[sim:call transfer_to_human_agents {"summary":"help"}] [sim:say Transferring.]')
    assert [m["content"] for m in sim.messages if m["role"] == "tool"] == ["Transfer successful"]
    sim, _ = _run('[sim:call call_expert {"expert":"expert-9"}] [sim:say never]',
                  max_errors=2)
    errors = [m for m in sim.messages if m["role"] == "tool"]
    assert [m["content"] for m in errors] == ["Error: Tool 'call_expert' not found."] * 2
    assert (sim.termination, sim.num_errors, sim.expert_calls) == ("too_many_errors", 2, 0)


def test_an_empty_turn_is_the_filler_under_toolorchestra_and_an_agent_error_under_tau2() -> None:
    sim, _ = _run("[sim:agent=silent] [sim:say hi]")
    assert sim.messages[2]["content"] == toolorchestra.FILLER and sim.termination == "user_stop"
    sim, _ = _run("[sim:agent=silent] [sim:say hi]", protocol="tau2")
    assert sim.messages[2]["content"] is None and sim.termination == "agent_error"


def test_think_and_message_tags_are_stripped() -> None:
    sim, _ = _run("[sim:agent=tagged] [sim:say All done.]")
    assert sim.messages[2]["content"] == "All done."
    assert toolorchestra.clean_text("<think>a</think>b<think>c</think> <message> x </message> y") == "x"
    assert toolorchestra.clean_text("<think>only thinking</think>") is None


def test_the_history_budget_keeps_a_head_and_a_tail_of_whole_messages() -> None:
    sizes = {"a": 10, "b": 10, "c": 10, "d": 10, "e": 10}

    async def count(text: str) -> int:
        return next(v for k, v in sizes.items() if f'"{k}"' in text)

    messages = [{"role": k} for k in sizes]
    cut = asyncio.run(toolorchestra.cut_history(messages, 41, count, {}))
    assert [m["role"] for m in cut] == ["a", "b", "d", "e"]
    assert asyncio.run(toolorchestra.cut_history(messages, 50, count, {})) == messages
    assert [m["role"] for m in asyncio.run(toolorchestra.cut_history(messages, 25, count, {}))] == ["a", "e"]

    sim, ctx = _run(f"{FIND} {BOOK} [sim:say Booked.]", history_budget=1000)
    tools_tokens = (len(json.dumps(toolorchestra.orchestrator_tools(
        get_domain("synthetic").agent_schemas(), list(EXPERTS)))) + 3) // 4
    assert tools_tokens < 1000
    sent = [b["messages"] for b in ctx.bodies if b["model"] == "agent"]
    # the second request (5 messages) keeps the system prompt, the greeting and the last tool result: the
    # user's message with the plan is cut, so the agent (the sim) no longer knows it and closes
    assert [len(s) for s in sent] == [3, 3] and all(s[0]["role"] == "system" for s in sent)
    assert [m["role"] for m in sent[1]] == ["system", "assistant", "tool"]
    assert [m["raw_data"]["history_cut"] for m in sim.messages[1:] if m["role"] == "assistant"] == [0, 2]
    assert sim.termination == "user_stop" and sim.messages[-2]["content"] == "Is there anything else I can help with?"
