"""The three tools: one expert call each, plus retrieval (search), the sandbox (enhance_reasoning) or
the judge (answer). Each returns a ToolResult: the turn record in ToolOrchestra's field names (§4.1),
the compact call entry for results.jsonl, and one ToolEvent for profile.jsonl.

A failed expert or judge call (after the engine's retries) is a tool error: the task ends with
status error, as the original's OSS scripts end it. Retrieval that stays down fails the task as
`retrieval_unavailable` (a score over rounds that searched nothing is not a score); under
`--on-retrieval-error continue` the round goes on without documents, the turn says why
(`_retrieval_error`) and the call entry is marked `retrieval_error` (scores.json counts them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from orchestra_ops.evals.agent import grading
from orchestra_ops.evals.agent.config import AgentConfig
from orchestra_ops.evals.agent.context import Budgeted, Evidence, expert_context
from orchestra_ops.evals.agent.protocol import MAX_QUERY_CHARS

from orchestra_ops.client.call_errors import CallError
from orchestra_ops.client.chat import Message
from orchestra_ops.runner.profile import ToolEvent
from orchestra_ops.runner.suite import TaskContext


@dataclass
class TaskState:
    task_id: Any
    eid: int | None
    question: str
    gold: str
    ctx: TaskContext
    config: AgentConfig
    evidence: Evidence
    budget: Budgeted
    round: int = 0


@dataclass
class AnswerResult:
    response: str
    pred: str
    correct: bool | None  # None: the judge never gave a verdict that parses (grader_error)
    grade: str  # empty | too_long | exact | judge | cais | grader_error
    judge: dict[str, Any] | None = None  # the CAIS verdict fields


@dataclass
class ToolResult:
    turn: dict[str, Any]
    entry: dict[str, Any]
    start_wall: float  # when the tool began: epoch seconds (profile.jsonl) and monotonic (its latency)
    start: float
    documents: list[str] = field(default_factory=list)
    code: tuple[str, str] | None = None
    answer: AnswerResult | None = None
    error: CallError | None = None


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 3)


async def _begin(state: TaskState, tool: str, alias: str, target: str, *, answer: bool) -> tuple[ToolResult, str]:
    """The clock started, the expert's context built, the turn and the call entry opened."""
    start_wall, start = time.time(), time.monotonic()
    context = await expert_context(state.evidence, state.budget, state.config.protocol, answer=answer)
    served = state.config.served.get(target, target)
    turn = {"tool": tool, "model": served, "alias": alias, "target": target, "context_str": context,
            "problem": state.question, "id": state.task_id, "eid": state.eid, "step": state.round}
    entry = {"round": state.round, "tool": tool, "alias": alias, "model": served, "replica": None, "status": "ok"}
    return ToolResult(turn, entry, start_wall, start), context


async def _ask_expert(state: TaskState, result: ToolResult, target: str, messages: list[Message],
                      call: str) -> tuple[str, float] | None:
    """(the expert's reply, its seconds); None when the call failed: `result.error` then says how."""
    start = time.monotonic()
    try:
        reply = await state.ctx.chat(target, messages, **state.config.sampling[call])
    except CallError as exc:
        result.error = exc
        return None
    expert_s = time.monotonic() - start
    result.entry["replica"] = reply.replica
    result.entry["expert_ms"] = _ms(expert_s)
    return reply.content or "", expert_s


def _finish(state: TaskState, result: ToolResult, expert_s: float | None, parts: dict[str, float]) -> ToolResult:
    entry = result.entry
    if result.error is not None:
        entry["status"] = result.error.kind
        result.turn["tool_error"] = result.error.message
        result.turn["tool_error_type"] = result.error.kind
    state.ctx.record(ToolEvent(task=state.task_id, tool=entry["tool"], start=result.start_wall,
                               latency_s=time.monotonic() - result.start, status=entry["status"], round=state.round,
                               alias=entry["alias"], target=result.turn["target"], model=entry["model"],
                               replica=entry["replica"], expert_s=expert_s, parts=parts,
                               error=result.error.message if result.error else None))
    return result


async def search(state: TaskState, alias: str, target: str) -> ToolResult:
    cfg, protocol = state.config, state.config.protocol
    result, context = await _begin(state, "search", alias, target, answer=False)
    turn, entry = result.turn, result.entry
    turn["answer"] = state.gold
    prompt = cfg.templates["query_writer"].render(context=context.strip(), problem=state.question)
    asked = await _ask_expert(state, result, target, [{"role": "user", "content": prompt}], "search")
    if asked is None:
        return _finish(state, result, None, {})
    content, expert_s = asked
    query = content.split("<query>")[-1].split("</query>")[0] if content else state.question
    turn.update(query=query, _query_llm_ms=_ms(expert_s), _retrieval_ms=0.0, _retrieval_retries=0,
                _search_backend=None, _search_local_hits=0, _search_tavily_hits=0)
    parts: dict[str, float] = {}
    if len(query) >= protocol.min_query_chars:
        found = await state.ctx.retrieve(protocol.retrieval_services, query[:MAX_QUERY_CHARS], topk=protocol.topk,
                                         eid=state.task_id, settings=cfg.retrieval)
        result.documents = found.documents
        turn.update(_retrieval_ms=_ms(found.latency_s), _retrieval_retries=found.retries,
                    _search_backend=found.backend, _search_local_hits=found.local_hits,
                    _search_tavily_hits=found.tavily_hits, retrieval_service=found.service,
                    retrieval_replica=found.replica)
        if found.error is not None:
            turn["_retrieval_error"] = found.error
            if cfg.on_retrieval_error == "fail":
                result.error = CallError("retrieval_unavailable", f"no retrieval service answered: {found.error}",
                                         attempts=found.attempts, replica=found.replica)
            else:
                entry["retrieval_error"] = True
        entry["retrieval_ms"] = _ms(found.latency_s)
        entry["documents"] = len(found.documents)
        parts["retrieval"] = found.latency_s
    turn["search_results_data"] = result.documents
    return _finish(state, result, expert_s, parts)


async def enhance_reasoning(state: TaskState, alias: str, target: str) -> ToolResult:
    cfg = state.config
    result, context = await _begin(state, "enhance_reasoning", alias, target, answer=False)
    turn, entry = result.turn, result.entry
    prompt = cfg.templates["code_writer"].render(context=context.strip(), problem=state.question)
    asked = await _ask_expert(state, result, target, [{"role": "user", "content": prompt}], "reasoner")
    if asked is None:
        return _finish(state, result, None, {})
    content, expert_s = asked
    code = content.split("```python")[-1].split("```")[0]
    turn.update(generated_code=code, exec_result="", _llm_ms=_ms(expert_s), _exec_ms=0.0)
    parts: dict[str, float] = {}
    if code:
        ran = await state.ctx.execute(code, cfg.sandbox)
        output = "" if ran.timed_out else ran.stdout  # a timeout leaves the output empty (as the original)
        turn.update(exec_result=output, _exec_ms=_ms(ran.duration_s), exec=ran.to_json(), exec_stderr=ran.stderr)
        entry["exec_ms"] = _ms(ran.duration_s)
        entry["exec"] = ran.status
        parts["exec"] = ran.duration_s
        if output.strip():
            result.code = (code, output)
    return _finish(state, result, expert_s, parts)


def _answer_messages(state: TaskState, context: str, answer_format: str) -> list[Message]:
    templates = state.config.templates
    prompt = templates["answerer"].render(context=context.strip(), problem=state.question)
    if answer_format == "boxed":
        return [{"role": "system", "content": templates["answer_boxed_system"].text.strip()},
                {"role": "user", "content": prompt}]
    return [{"role": "user", "content": prompt + "\n" + templates["answer_tag"].text.strip()}]


async def answer(state: TaskState, alias: str, target: str) -> ToolResult:
    cfg = state.config
    result, context = await _begin(state, "answer", alias, target, answer=True)
    turn, entry = result.turn, result.entry
    turn["answer"] = state.gold
    answer_format = cfg.answer_formats.get(alias, "answer")
    messages = _answer_messages(state, context, answer_format)
    turn["messages"] = messages[-1]["content"] if answer_format == "answer" else messages
    asked = await _ask_expert(state, result, target, messages, "answer")
    if asked is None:
        return _finish(state, result, None, {})
    response, expert_s = asked
    pred = grading.extract(response, answer_format)
    turn.update(response=response, pred=pred, answer_format=answer_format, _expert_ms=_ms(expert_s))
    judge_start = time.monotonic()
    try:
        graded = await grade(state, response, pred)
    except CallError as exc:
        result.error = CallError(f"judge_{exc.kind}", f"the judge failed: {exc.message}", attempts=exc.attempts,
                                 replica=exc.replica)
        return _finish(state, result, expert_s, {"judge": time.monotonic() - judge_start})
    judge_s = time.monotonic() - judge_start
    result.answer = graded
    turn.update(correctness=bool(graded.correct), grade=graded.grade)
    parts: dict[str, float] = {}
    if graded.grade in ("judge", "cais", "grader_error"):
        turn["_judge_ms"] = _ms(judge_s)
        entry["judge_ms"] = _ms(judge_s)
        parts["judge"] = judge_s
    if graded.judge is not None:
        turn["judge_response"] = graded.judge
    return _finish(state, result, expert_s, parts)


async def grade(state: TaskState, response: str, pred: str) -> AnswerResult:
    cfg = state.config
    if cfg.judge_protocol == "cais":
        if not response.strip():
            return AnswerResult(response, pred, False, "empty")
        prompt = cfg.templates["cais_judge"].render(question=state.question, response=response,
                                                    correct_answer=state.gold)
        for _ in range(cfg.judge_attempts):
            reply = await state.ctx.chat(cfg.judge, [{"role": "user", "content": prompt}],
                                         response_format=grading.CAIS_SCHEMA, **cfg.sampling["judge"])
            verdict = grading.parse_cais(reply.content)
            if verdict is not None:
                return AnswerResult(response, pred, verdict.is_correct, "cais", verdict.to_json())
        return AnswerResult(response, pred, None, "grader_error")
    quick = grading.shortcut(pred, state.gold)
    if quick is not None:
        return AnswerResult(response, pred, quick[0], quick[1])
    prompt = cfg.templates["judge"].render(question=state.question, pred=pred, gold=state.gold)
    for _ in range(cfg.judge_attempts):
        reply = await state.ctx.chat(cfg.judge, [{"role": "user", "content": prompt}], **cfg.sampling["judge"])
        parsed = grading.parse_correct(reply.content)
        if parsed is not None:
            return AnswerResult(response, pred, parsed, "judge")
    return AnswerResult(response, pred, None, "grader_error")


TOOLS = {"search": search, "enhance_reasoning": enhance_reasoning, "answer": answer}
