"""Context budgets (§2.4, §2.6) with the sim's tokenizer: left truncation, dedup, HLE vs FRAMES."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from orchestra_ops.evals.agent.context import Budgeted, Evidence, expert_context, orchestrator_context
from orchestra_ops.evals.agent.protocol import FRAMES, HLE, Budgets
from orchestra_ops.services.simllm import tokens


class SimTokenizer:
    """The sim's /tokenize rules in-process (what a replica of the sim would answer)."""

    description = "sim"

    def __init__(self) -> None:
        self.calls = 0

    async def count(self, text: str) -> int:
        self.calls += 1
        return len(tokens.encode(text))

    async def keep_last(self, text: str, limit: int) -> tuple[str, int]:
        self.calls += 1
        ids = tokens.encode(text)
        if len(ids) <= limit:
            return text, len(ids)
        return (tokens.decode(ids[-limit:]) if limit > 0 else ""), len(ids)


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_documents_are_deduplicated_and_added_best_last() -> None:
    evidence = Evidence()
    assert evidence.add_documents(["best", "second", "third"]) == 3
    assert evidence.add_documents(["new best", "second"]) == 1
    assert evidence.documents == ["third", "second", "best", "new best"]


def test_hle_orchestrator_context_layout_and_budget() -> None:
    evidence = Evidence()
    evidence.add_documents(["d" * 2000, "short doc"])
    evidence.code.append(("print(1)", "1\n"))
    tokenizer = SimTokenizer()
    context = run(orchestrator_context(evidence, Budgeted(tokenizer, "q?"), HLE))
    assert context == ("Documents:\nDoc 1: short doc ...\n\nDoc 2: " + "d" * 1200 + " ...\n\n"
                       "\npython code and execution outputs:\n```python\nprint(1)\n```\n\n```output\n1\n\n```\n\n")
    assert tokenizer.calls == 1  # the question's length only: everything else is far under the budget
    small = replace(HLE, budgets=replace(HLE.budgets, orchestrator_context=100))
    cut = run(orchestrator_context(evidence, Budgeted(SimTokenizer(), "q?"), small))
    body = cut.removeprefix("Documents:\n")
    assert len(tokens.encode(body)) == 100 - len(tokens.encode("q?"))
    assert body.endswith("```output\n1\n\n```\n\n") and "Doc 1" not in body  # the oldest goes first


def test_code_over_the_budget_drops_the_documents_and_keeps_its_fence() -> None:
    evidence = Evidence(code=[("x = 1\n" * 200, "out\n")])
    evidence.add_documents(["a document"])
    budgets = Budgets(orchestrator_context=50, orchestrator_code=30)
    context = run(orchestrator_context(evidence, Budgeted(SimTokenizer(), "q"), replace(HLE, budgets=budgets)))
    assert context.startswith("```\n") and "Doc 1" not in context
    assert len(tokens.encode(context[4:])) == 30


def test_frames_always_has_the_code_header_and_does_not_subtract_the_question() -> None:
    tokenizer = SimTokenizer()
    assert run(orchestrator_context(Evidence(), Budgeted(tokenizer, "q"), FRAMES)) == \
        "\npython code and execution outputs:\n"
    assert run(orchestrator_context(Evidence(), Budgeted(tokenizer, "q"), HLE)) == ""
    assert tokenizer.calls == 0
    evidence = Evidence()
    evidence.add_documents(["w" * 5000])
    assert "w" * 4000 + "\n\n" in run(orchestrator_context(evidence, Budgeted(tokenizer, "q"), FRAMES))


def test_expert_contexts_cut_documents_for_search_but_not_for_the_answer() -> None:
    evidence = Evidence()
    evidence.add_documents(["z" * 3000])
    search = run(expert_context(evidence, Budgeted(SimTokenizer(), "q"), HLE, answer=False))
    answer = run(expert_context(evidence, Budgeted(SimTokenizer(), "q"), HLE, answer=True))
    assert search == "Documents:\nDoc 1: " + "z" * 1000 + "\n\n"
    assert answer == "Documents:\nDoc 1: " + "z" * 3000 + "\n\n"
    tight = replace(HLE, budgets=replace(HLE.budgets, expert_context=60))
    cut = run(expert_context(evidence, Budgeted(SimTokenizer(), "question?"), tight, answer=True))
    assert len(tokens.encode(cut.removeprefix("Documents:\n"))) == 60 - len(tokens.encode("question?"))
