"""The sim's pure rules: answers, roles, judge verdicts, fault plans and options."""

from __future__ import annotations

import json

import pytest
from orchestra_ops.services.simllm import healthbench_rules as rubric_rules
from orchestra_ops.services.simllm import replies, rules
from orchestra_ops.services.simllm.config import SimConfig, parse_fail_spec
from orchestra_ops.services.simllm.faults import FaultPlan

from orchestra_ops.errors import ConfigError

SEARCH = {"type": "function", "function": {"name": "search", "parameters": {
    "type": "object", "properties": {"query": {"type": "string"}, "model": {"type": "string",
                                                                           "enum": ["a", "b", "c"]}},
    "required": ["query", "model"]}}}
ANSWER = {"type": "function", "function": {"name": "answer", "parameters": {
    "type": "object", "properties": {"answer": {"type": "string"}, "k": {"type": "integer"}}}}}


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def test_answer_token_is_a_whitespace_insensitive_hash() -> None:
    token = replies.answer_token("What is 2 + 2?")
    assert replies.TOKEN_RE.fullmatch(token)
    assert token == replies.answer_token("  What is\n2 + 2? ")
    assert token != replies.answer_token("What is 2 + 3?")


def test_about_sixty_percent_of_questions_are_right() -> None:
    right = sum(replies.answer_is_right(f"question {i}") for i in range(2000))
    assert 0.55 < right / 2000 < 0.65
    assert all(1 <= replies.orchestrator_rounds(f"q{i}") <= 3 for i in range(200))


def test_expert_answers_boxed_token_and_keeps_a_token_it_was_given() -> None:
    system = {"role": "system", "content": "be brief"}
    reply = rules.respond({"messages": [system, user("Capital of France?")]})
    assert reply.role == replies.EXPERT and reply.finish_reason == "stop"
    assert reply.content is not None
    assert reply.content.endswith(f"\\boxed{{{replies.answer_token('Capital of France?')}}}.")
    passed = rules.respond({"messages": [user("Answer this. Draft: sim-0badc0de")]})
    assert passed.content is not None and "\\boxed{sim-0badc0de}" in passed.content


def test_content_parts_count_as_text() -> None:
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "Q?"}]}]}
    assert replies.question_of(body["messages"]) == "Q?"


def _run_orchestrator(question: str, tools: list[dict]) -> list[dict[str, str]]:
    messages: list[dict] = [{"role": "system", "content": "You orchestrate."}, user(question)]
    calls: list[dict[str, str]] = []
    for _ in range(10):
        reply = rules.respond({"messages": messages, "tools": tools})
        assert reply.role == replies.ORCHESTRATOR and reply.finish_reason == "tool_calls"
        call = reply.tool_calls[0]
        calls.append(call)
        if call["name"] == "answer":
            return calls
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": "x", "type": "function", "function": dict(call)}]})
        messages.append({"role": "tool", "tool_call_id": "x", "content": "some result"})
    raise AssertionError("the orchestrator never answered")


@pytest.mark.parametrize("question", [f"Who wrote book number {i}?" for i in range(6)])
def test_orchestrator_calls_tools_for_its_rounds_then_answers(question: str) -> None:
    calls = _run_orchestrator(question, [SEARCH, ANSWER])
    assert len(calls) == replies.orchestrator_rounds(question) + 1
    for call in calls[:-1]:
        args = json.loads(call["arguments"])
        assert call["name"] == "search" and args["query"] == question and args["model"] in "abc"
    assert json.loads(calls[-1]["arguments"]) == {"answer": replies.answer_token(question), "k": 1}


def test_orchestrator_named_tool_choice_and_no_answer_tool() -> None:
    body = {"messages": [user("q")], "tools": [SEARCH, ANSWER],
            "tool_choice": {"type": "function", "function": {"name": "answer"}}}
    assert rules.respond(body).tool_calls[0]["name"] == "answer"
    none = rules.respond({"messages": [user("q")], "tools": [SEARCH], "tool_choice": "none"})
    assert none.role == replies.EXPERT
    done = [user("q"), {"role": "assistant", "tool_calls": [{"function": {"name": "search"}}]}] * 3
    final = rules.respond({"messages": done, "tools": [SEARCH]})
    assert final.tool_calls == [] and final.content is not None and "\\boxed{" in final.content


def hle_prompt(question: str, response: str) -> str:
    return (f"Judge whether the following [response] to [question] is correct.\n\n[question]: {question}\n\n"
            f"[response]: {response}\n\nextracted_final_answer: ...\n[correct_answer]: Paris")


@pytest.mark.parametrize("question", [f"hle question {i}" for i in range(8)])
def test_hle_judge_grades_the_token_it_finds(question: str) -> None:
    token = replies.answer_token(question)
    reply = rules.respond({"messages": [user(hle_prompt(question, f"\\boxed{{{token}}}"))]})
    verdict = json.loads(reply.content or "")
    assert reply.judge and set(verdict) == {"extracted_final_answer", "reasoning", "correct", "confidence"}
    assert verdict["extracted_final_answer"] == token
    assert verdict["correct"] == ("yes" if replies.answer_is_right(question) else "no")
    fallback = json.loads(rules.respond({"messages": [user(hle_prompt(question, "Paris"))]}).content or "")
    assert fallback["correct"] == ("yes" if replies.answer_is_right(question) else "no")


@pytest.mark.parametrize("question", [f"rubric question {i}" for i in range(8)])
def test_rubric_judge(question: str) -> None:
    token = replies.answer_token(question)
    prompt = (f"<<conversation>>\nuser: {question}\nassistant: \\boxed{{{token}}}\n<<rubric_item>>\n"
              "[5] Mentions X\nReturn JSON with explanation and criteria_met.")
    verdict = json.loads(rules.respond({"messages": [user(prompt)]}).content or "")
    assert verdict == {"explanation": verdict["explanation"],
                       "criteria_met": rubric_rules.criteria_met(token, "Mentions X")}
    with pytest.raises(json.JSONDecodeError):
        json.loads(replies.malformed(rules.respond({"messages": [user(prompt)]})).content or "")


def test_token_estimates() -> None:
    body = {"messages": [user("x" * 400)]}
    assert replies.prompt_tokens(body) == 100 + 4
    assert replies.prompt_tokens({**body, "tools": [ANSWER]}) > 104


def test_parse_fail_spec() -> None:
    assert parse_fail_spec("500:0.05,429:0.02") == ((500, 0.05), (429, 0.02))
    assert parse_fail_spec(None) == ()
    for bad in ("500", "500:x", "200:0.1", "500:1.5", "500:0.7,429:0.5", "500:0.1,500:0.1"):
        with pytest.raises(ConfigError):
            parse_fail_spec(bad)


def test_config_rejects_bad_values() -> None:
    with pytest.raises(ConfigError, match="jitter"):
        SimConfig(model="m", jitter=2.0)
    with pytest.raises(ConfigError, match="latency-ms"):
        SimConfig(model="m", latency_ms=-1)


def test_fault_plan_is_deterministic_and_follows_the_rates() -> None:
    config = SimConfig(model="m", fail=((500, 0.05), (429, 0.02)), hang_rate=0.01, malformed_rate=0.1,
                       jitter=0.5, seed=7)
    plan_a, plan_b = FaultPlan(config), FaultPlan(config)
    fates = [plan_a.next() for _ in range(2000)]
    assert fates == [plan_b.next() for _ in range(2000)]
    other = FaultPlan(SimConfig(model="m", fail=config.fail, seed=8))
    assert [f.status for f in fates[:300]] != [other.next().status for _ in range(300)]
    assert 70 <= sum(f.status == 500 for f in fates) <= 130
    assert 20 <= sum(f.status == 429 for f in fates) <= 60
    assert 150 <= sum(f.malformed for f in fates) <= 250
    assert all(0.5 <= f.latency_factor <= 1.5 for f in fates)
