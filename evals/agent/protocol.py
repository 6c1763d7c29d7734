"""The protocol's constants and what differs between HLE and FRAMES (§2.3-2.6), as data.

Budgets are tokens of the orchestrator's tokenizer unless the name says chars; every one can be
overridden with `--budget NAME=VALUE`; sampling parameters with `--sampling CALL.KEY=VALUE`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from orchestra_ops.errors import ConfigError

# tool name -> the role its aliases go to unless the topology's `aliases:` (or --alias) says otherwise
TOOL_ROLES: Mapping[str, str] = {"search": "search", "enhance_reasoning": "reasoner", "answer": "answer"}

# The aliases the original validates against when a tools file does not list them (its ALL_TOOLS)
DEFAULT_ALIASES: Mapping[str, tuple[str, ...]] = {
    "enhance_reasoning": ("reasoner-1", "reasoner-2", "reasoner-3"),
    "answer": ("answer-math-1", "answer-math-2", "answer-1", "answer-2", "answer-3", "answer-4"),
    "search": ("search-1", "search-2", "search-3"),
}

# invalid-call codes of the original (§2.3 step 5-6)
NO_CALL, UNKNOWN_TOOL, BAD_ARGUMENTS, BAD_MODEL = 342, 350, 351, 360

MAX_QUERY_CHARS = 390  # the retrieval payload's query is cut to this (§2.5)
MAX_ANSWER_WORDS = 500  # a longer prediction is wrong without asking the judge (§3)

CALLS = ("orchestrator", "search", "reasoner", "answer", "judge")
DEFAULT_SAMPLING: Mapping[str, Mapping[str, Any]] = {
    "orchestrator": {"temperature": 1.0, "max_tokens": 12000},
    "search": {"temperature": 0.2, "max_tokens": 8000},
    "reasoner": {"temperature": 0.2, "max_tokens": 8000},
    "answer": {"temperature": 0.2, "max_tokens": 8000},
    "judge": {"temperature": 1.0, "max_completion_tokens": 16384},  # the gpt-5 <correct> judge (§2.8)
}
CAIS_JUDGE_SAMPLING: Mapping[str, Any] = {"max_completion_tokens": 4096}  # no temperature (scoring.md B4)


@dataclass(frozen=True)
class Budgets:
    """Context budgets (§2.4, §2.6). `*_doc_chars` 0 keeps whole documents."""

    orchestrator_context: int
    orchestrator_code: int = 12000
    orchestrator_doc_chars: int = 1200
    expert_context: int = 24000
    expert_code: int = 12000
    answer_code: int = 10000
    expert_doc_chars: int = 1000  # search and enhance_reasoning; the answer expert gets whole documents

    def with_overrides(self, items: Iterable[str]) -> Budgets:
        names = {f.name for f in fields(self)}
        changes: dict[str, int] = {}
        for item in items:
            name, sep, value = item.partition("=")
            name = name.strip().replace("-", "_")
            if not sep or name not in names:
                raise ConfigError(f"--budget {item!r}: expected NAME=TOKENS, NAME one of {', '.join(sorted(names))}")
            try:
                changes[name] = int(value)
            except ValueError:
                raise ConfigError(f"--budget {item!r}: {value!r} is not a whole number") from None
            if changes[name] < 0:
                raise ConfigError(f"--budget {item!r}: must be >= 0")
        return replace(self, **changes)

    def to_json(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class Protocol:
    """What one suite of the agent loop does differently (HLE vs FRAMES)."""

    name: str
    topk: int  # documents asked of the retrieval service per search
    min_query_chars: int  # a shorter query retrieves nothing
    retrieval_services: tuple[str, ...]  # tried in order: the first that answers is used
    budgets: Budgets
    orchestrator_minus_question: bool  # HLE subtracts the question's tokens from the orchestrator budget
    orchestrator_doc_suffix: str  # HLE: " ..." after each cut document
    code_header_always: bool  # FRAMES puts the code header in the context even with no code
    search_until_documents: bool  # FRAMES offers `search` only until a search returned documents
    answer_label: str  # what precedes the question in the answer prompt ("Problem:\n" for HLE)
    judge_protocols: tuple[str, ...]


HLE = Protocol(name="hle", topk=50, min_query_chars=5, retrieval_services=("retrieval",),
               budgets=Budgets(orchestrator_context=27000), orchestrator_minus_question=True,
               orchestrator_doc_suffix=" ...", code_header_always=False, search_until_documents=False,
               answer_label="Problem:\n", judge_protocols=("toolorchestra", "cais"))
FRAMES = Protocol(name="frames", topk=150, min_query_chars=10, retrieval_services=("wiki_retrieval", "retrieval"),
                  budgets=Budgets(orchestrator_context=24000, orchestrator_doc_chars=4000, expert_doc_chars=0),
                  orchestrator_minus_question=False, orchestrator_doc_suffix="", code_header_always=True,
                  search_until_documents=True, answer_label="", judge_protocols=("toolorchestra",))


def sampling(items: Iterable[str]) -> dict[str, dict[str, Any]]:
    """DEFAULT_SAMPLING with `--sampling CALL.KEY=VALUE` applied (VALUE is JSON, else a string;
    an empty VALUE removes the key)."""
    merged = {call: dict(params) for call, params in DEFAULT_SAMPLING.items()}
    for item in items:
        target, sep, raw = item.partition("=")
        call, dot, key = target.strip().partition(".")
        if not sep or not dot or call not in merged or not key:
            raise ConfigError(f"--sampling {item!r}: expected CALL.KEY=VALUE with CALL one of {', '.join(CALLS)} "
                              "(e.g. answer.max_tokens=4000)")
        if raw == "":
            merged[call].pop(key, None)
            continue
        try:
            merged[call][key] = json.loads(raw)
        except ValueError:
            merged[call][key] = raw
    return merged
