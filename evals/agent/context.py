"""The context an orchestrator or expert sees, rebuilt every round under token budgets (§2.4, §2.6).

Documents are kept deduplicated, newest search last and best-ranked last; code runs as
(code, output) pairs. Truncation keeps the *end* (`keep_last`), so the oldest material goes first.
Every count is the orchestrator's tokenizer's. A text whose UTF-8 size is already below a budget
needs no tokenizer call at all (no tokenizer makes more tokens than bytes); its size then stands
in for its length in the comparisons below, which only ask whether it is under the budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestra_ops.evals.agent.protocol import Protocol

from orchestra_ops.client.tokenizer import Tokenizer

CODE_HEADER = "\npython code and execution outputs:\n"
DOCS_PREFIX = "Documents:\n"


@dataclass
class Evidence:
    """What the task has gathered so far."""

    documents: list[str] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    code: list[tuple[str, str]] = field(default_factory=list)  # (code, output), outputs non-empty

    def add_documents(self, ranked: list[str]) -> int:
        """Add a search's documents worst first (best last), skipping exact duplicates; return how many."""
        added = 0
        for doc in reversed(ranked):
            if doc not in self.seen:
                self.seen.add(doc)
                self.documents.append(doc)
                added += 1
        return added


class Budgeted:
    """`keep_last` with the byte shortcut, and the question's token count computed once per task."""

    def __init__(self, tokenizer: Tokenizer, question: str) -> None:
        self.tokenizer = tokenizer
        self.question = question
        self._question_tokens: int | None = None
        self.calls = 0  # tokenizer calls made (for the trajectory)

    async def cut(self, text: str, limit: int) -> tuple[str, int]:
        """(the last `limit` tokens of text, its length: exact, or its byte size when that is below `limit`)."""
        size = len(text.encode("utf-8"))
        if size < limit or not text:
            return text, size
        self.calls += 1
        return await self.tokenizer.keep_last(text, limit)

    async def question_tokens(self) -> int:
        if self._question_tokens is None:
            self.calls += 1
            self._question_tokens = await self.tokenizer.count(self.question)
        return self._question_tokens


def _code_text(code: list[tuple[str, str]]) -> str:
    return "".join(f"```python\n{c}\n```\n\n```output\n{o}\n```\n\n" for c, o in code)


async def _cut_code(budget: Budgeted, code: list[tuple[str, str]], limit: int) -> tuple[str, int]:
    text, length = await budget.cut(_code_text(code), limit)
    if text and not text.startswith("```"):
        text = "```\n" + text
    return text, length


async def orchestrator_context(evidence: Evidence, budget: Budgeted, protocol: Protocol) -> str:
    """The context of the orchestrator's prompt (§2.4)."""
    b = protocol.budgets
    docs = "".join(f"Doc {i + 1}: {_cut_doc(doc, b.orchestrator_doc_chars)}{protocol.orchestrator_doc_suffix}\n\n"
                   for i, doc in enumerate(evidence.documents))
    code, code_length = await _cut_code(budget, evidence.code, b.orchestrator_code)
    if not docs and not code and not protocol.code_header_always:
        return ""
    limit = b.orchestrator_context
    if protocol.orchestrator_minus_question:
        limit -= await budget.question_tokens()
    if code_length >= limit:
        return code  # the code alone; the documents are dropped (as the original)
    body = docs + CODE_HEADER + code if (code or protocol.code_header_always) else docs
    context, _ = await budget.cut(body, limit)
    return DOCS_PREFIX + context if docs else context


async def expert_context(evidence: Evidence, budget: Budgeted, protocol: Protocol, *, answer: bool) -> str:
    """The context an expert sees (§2.6): documents (cut for search/reasoner on HLE) and code."""
    b = protocol.budgets
    doc_chars = 0 if answer else b.expert_doc_chars
    docs = "".join(f"Doc {i + 1}: {_cut_doc(doc, doc_chars)}\n\n" for i, doc in enumerate(evidence.documents))
    code, _ = await _cut_code(budget, evidence.code, b.answer_code if answer else b.expert_code)
    if not docs and not code:
        return ""
    context, _ = await budget.cut(docs + code, b.expert_context - await budget.question_tokens())
    return DOCS_PREFIX + context if docs else context


def _cut_doc(doc: str, chars: int) -> str:
    return doc[:chars] if chars > 0 else doc
