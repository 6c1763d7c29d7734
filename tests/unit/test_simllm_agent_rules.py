"""The sim's agent roles (orchestrator, query/code writer, answerer, <correct> judge) and its tokenizer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from orchestra_ops.evals.bundled import packaged
from orchestra_ops.services.simllm import agent_rules, replies, rules, tokens

TOOLS = json.loads(Path(packaged("agent/templates/agent_tools.json")).read_text())
Q = "Which instrument does the glassblower Uma Novak play?"


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def orchestrate(context: str, question: str = Q, tools: list | None = None) -> replies.Reply:
    body = {"messages": [{"role": "system", "content": "tools"}, user(f"Problem: {question}\n\n{context}\n\nPick.")],
            "tools": TOOLS if tools is None else tools}
    assert rules.classify(body) == agent_rules.AGENT_ORCHESTRATOR
    return rules.respond(body)


def test_the_orchestrator_follows_its_plan_by_the_evidence_in_the_context() -> None:
    plan = agent_rules.plan(Q)
    assert 1 <= len(plan) <= 3 and plan.count("search") <= 1
    context = ""
    for step, tool in enumerate([*plan, "answer"]):
        call = orchestrate(context).tool_calls[0]
        assert call["name"] == tool
        aliases = agent_rules.aliases_of(next(t for t in TOOLS if t["function"]["name"] == tool))
        salt = int(replies._digest(Q)[18:20], 16)
        assert json.loads(call["arguments"])["model"] == aliases[(salt + step) % len(aliases)]
        context += "Doc 1: a document\n\n" if tool == "search" else "```output\nx\n```\n\n"
    assert agent_rules.progress("Doc 3: d\n```output\n1\n```\n```output\n2\n```") == 3


def test_aliases_come_from_the_enum_or_the_description() -> None:
    tool = json.loads(json.dumps(TOOLS[0]))
    assert agent_rules.aliases_of(tool) == ["reasoner-1", "reasoner-2", "reasoner-3"]
    del tool["function"]["parameters"]["properties"]["model"]["enum"]
    assert agent_rules.aliases_of(tool) == ["reasoner-1", "reasoner-2", "reasoner-3"]


def test_invalid_markers() -> None:
    none = orchestrate("", question=f"{Q} [sim:invalid=none]")
    assert none.tool_calls == [] and none.content
    alias = orchestrate("", question=f"{Q} [sim:invalid=unknown_alias+valid]").tool_calls
    assert len(alias) == 2 and json.loads(alias[0]["arguments"])["model"].endswith("-99")
    assert orchestrate("", question=f"{Q} [sim:invalid=bad_arguments]").tool_calls[0]["arguments"] == "{not json"


def test_generic_tools_keep_the_generic_orchestrator() -> None:
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}, "model": {"type": "string"}},
        "required": ["query", "model"]}}}
    assert rules.classify({"messages": [user("q")], "tools": [tool]}) == replies.ORCHESTRATOR


def test_experts_answer_by_the_question_after_the_context() -> None:
    query = rules.respond({"messages": [user(f"Doc 1: x\n\nQuestion: {Q}\nWrite it in <query> and </query>.")]})
    assert query.role == agent_rules.QUERY_WRITER and query.content.endswith(f"<query>{Q}</query>")
    code = rules.respond({"messages": [user(f"\n\nQuestion: {Q}\nWrite code between ```python and ```.")]})
    assert code.role == agent_rules.CODE_WRITER
    program = code.content.split("```python\n")[1].split("```")[0]
    ran = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert ran.stdout == agent_rules.code_output(Q)
    answer = rules.respond({"messages": [user(f"Documents:\nDoc 1: x\n\nProblem:\n{Q}\nUse <answer> and </answer>.")]})
    assert answer.content.endswith(f"<answer>{replies.answer_token(Q)}</answer>")
    boxed = rules.respond({"messages": [{"role": "system", "content": "Put it in \\boxed{}."},
                                        user(f"ctx\n\nProblem:\n{Q}")]})
    assert boxed.role == agent_rules.ANSWERER_BOXED and f"\\boxed{{{replies.answer_token(Q)}}}" in boxed.content


def test_the_correct_judge_grades_the_student_answer_token() -> None:
    right = next(t for t in (replies.answer_token(f"x{i}") for i in range(50)) if replies.token_is_right(t))
    wrong = next(t for t in (replies.answer_token(f"x{i}") for i in range(50)) if not replies.token_is_right(t))
    for token, verdict in ((right, "True"), (wrong, "False")):
        reply = rules.respond({"messages": [user(f"Question: q\n\nStudent answer: {token}\n\nReference answer: "
                                                 f"{right}\n\nSay <correct>True</correct> or not.")]})
        assert reply.judge and reply.content.endswith(f"<correct>{verdict}</correct>")


def test_tokens_round_trip_and_count_a_quarter_of_the_characters() -> None:
    text = "héllo wörld 😀 — the end"
    ids = tokens.encode(text)
    assert len(ids) == replies.estimate_tokens(text) and tokens.decode(ids) == text
    assert tokens.decode(ids[-2:]) == text[(len(ids) - 2) * 4:]
