"""One task of the agent loop (§2.3): rounds of orchestrator call -> first valid tool call -> context.

Each round the orchestrator gets the system message and the problem with the context rebuilt under
its budgets, and the tools (FRAMES: without `search` once a search returned documents). A round
whose reply has no valid call is recorded with its codes and consumed. The first valid call runs
(its alias goes to the role or model the routing maps it to); `answer` ends the task. `max_rounds`
without an answer is a wrong answer with status ok. A failed orchestrator, expert or judge call
ends the task with status error (UnitFailed keeps its rounds and calls); a judge that never gave a
verdict that parses ends it as `grader_error`, which the score leaves out and counts. Under
--retry-failed a grader_error task only asks the judge again about the answer it already has.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from orchestra_ops.evals.agent.config import AgentConfig
from orchestra_ops.evals.agent.context import Budgeted, Evidence, orchestrator_context
from orchestra_ops.evals.agent.records import read_trajectory, write_trajectory
from orchestra_ops.evals.agent.tools import TOOLS, AnswerResult, TaskState, grade
from orchestra_ops.evals.agent.toolspec import check_calls

from orchestra_ops.client.call_errors import CallError
from orchestra_ops.runner.dataset import Sample
from orchestra_ops.runner.suite import TaskContext, UnitFailed


async def run_task(sample: Sample, ctx: TaskContext, config: AgentConfig) -> dict[str, Any]:
    if ctx.previous and ctx.previous.get("error_type") == "grader_error":
        regraded = await regrade(sample, ctx, config, ctx.previous)
        if regraded is not None:
            return regraded
    question, gold = str(sample["question"]), str(sample["answer"])
    budget = Budgeted(ctx.tokenizer(config.orchestrator), question)
    state = TaskState(task_id=sample["id"], eid=sample.get("_eid"), question=question, gold=gold, ctx=ctx,
                      config=config, evidence=Evidence(), budget=budget)
    rounds: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    invalid: Counter[str] = Counter()
    answer: AnswerResult | None = None
    error: CallError | None = None
    system = config.templates["orchestrator_system"].text.strip()
    for step in range(config.max_rounds):
        state.round = step
        hidden = frozenset({"search"}) if config.protocol.search_until_documents and state.evidence.documents \
            else frozenset()
        context = await orchestrator_context(state.evidence, budget, config.protocol)
        prompt = config.templates["orchestrator"].render(problem=question, context=context)
        log: dict[str, Any] = {"round": step, "context": context, "offered": [
            t["function"]["name"] for t in config.tools.offered(hidden)]}
        rounds.append(log)
        start = time.monotonic()
        try:
            reply = await ctx.chat(config.orchestrator, [{"role": "system", "content": system},
                                                         {"role": "user", "content": prompt}],
                                   tools=config.tools.offered(hidden), **config.sampling["orchestrator"])
        except CallError as exc:
            log["orchestrator_error"] = {"kind": exc.kind, "message": exc.message}
            error = exc
            break
        checked = check_calls(reply.message, config.tools)
        log.update(content=reply.content, calls=checked.raw, codes=checked.codes, replica=reply.replica,
                   orchestrator_ms=round((time.monotonic() - start) * 1000, 3),
                   prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens)
        invalid.update(str(code) for code in checked.invalid)
        if checked.tool is None or checked.alias is None:
            continue
        result = await TOOLS[checked.tool](state, checked.alias, config.aliases[checked.alias])
        log["tool"] = result.turn
        calls.append(result.entry)
        if result.error is not None:
            error = result.error
            break
        if checked.tool == "search":
            log["documents_added"] = state.evidence.add_documents(result.documents)
        elif result.code is not None:
            state.evidence.code.append(result.code)
        elif result.answer is not None:
            answer = result.answer
            break
    correct = bool(answer and answer.correct)
    fields: dict[str, Any] = {
        "correct": correct, "pred": answer.pred if answer else "", "grade": answer.grade if answer else "no_answer",
        "rounds": len(rounds), "answered": answer is not None, "invalid": dict(sorted(invalid.items())),
        "calls": calls,
    }
    if answer is not None and answer.judge is not None:
        fields["judge"] = {"correct": answer.judge["correct"], "confidence": answer.judge["confidence"]}
    trajectory = {"id": sample["id"], "eid": state.eid, "problem": question, "answer": gold,
                  "status": "error" if error or (answer and answer.correct is None) else "ok", **fields,
                  "rounds": rounds, "documents": state.evidence.documents,
                  "code": [{"code": c, "output": o} for c, o in state.evidence.code],
                  "tokenizer_calls": budget.calls}
    trajectory["rounds_count"] = len(rounds)
    fields["trajectory"] = write_trajectory(config.trajectories, sample["id"], trajectory)
    if error is not None:
        raise UnitFailed(error.kind, f"round {state.round}: {error.message}", fields)
    if answer is not None and answer.correct is None:
        raise UnitFailed("grader_error", f"the judge gave no verdict that parses in {config.judge_attempts} "
                         "attempt(s); left out of the score", fields)
    return fields


async def regrade(sample: Sample, ctx: TaskContext, config: AgentConfig, previous: dict[str, Any]
                  ) -> dict[str, Any] | None:
    """A grader_error rerun (--retry-failed) asks the judge again about the answer it already has;
    None when the trajectory holds no answer (the task then runs again from the start)."""
    run_dir = config.trajectories.parent
    trajectory = read_trajectory(run_dir, previous)
    rounds = (trajectory or {}).get("rounds") or []
    turn = rounds[-1].get("tool") if rounds else None
    if trajectory is None or not isinstance(turn, dict) or turn.get("tool") != "answer" or "response" not in turn:
        return None
    question, gold = str(sample["question"]), str(sample["answer"])
    budget = Budgeted(ctx.tokenizer(config.orchestrator), question)
    state = TaskState(task_id=sample["id"], eid=sample.get("_eid"), question=question, gold=gold, ctx=ctx,
                      config=config, evidence=Evidence(), budget=budget)
    start = time.monotonic()
    graded = await grade(state, str(turn["response"]), str(turn.get("pred", "")))
    turn.update(correctness=bool(graded.correct), grade=graded.grade,
                _judge_ms=round((time.monotonic() - start) * 1000, 3))
    if graded.judge is not None:
        turn["judge_response"] = graded.judge
    fields: dict[str, Any] = {k: previous[k] for k in ("pred", "rounds", "answered", "invalid", "calls")
                              if k in previous}
    fields.update(correct=bool(graded.correct), grade=graded.grade, regraded=True)
    if graded.judge is not None:
        fields["judge"] = {"correct": graded.judge["correct"], "confidence": graded.judge["confidence"]}
    trajectory.update(status="ok" if graded.correct is not None else "error", correct=fields["correct"],
                      grade=graded.grade, regraded=True)
    fields["trajectory"] = write_trajectory(config.trajectories, sample["id"], trajectory)
    if graded.correct is None:
        raise UnitFailed("grader_error", f"the judge again gave no verdict that parses in {config.judge_attempts} "
                         "attempt(s); left out of the score", fields)
    return fields
