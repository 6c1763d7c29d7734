"""Grading one rubric item as the reference does (scoring.md A5-A6), with a bound on re-asks.

One judge call per rubric item: a `system` message (default "You are a helpful assistant.") and
one `user` message, the grader template with `<<conversation>>` and `<<rubric_item>>` filled in.
The reply is parsed as the reference parses it (`parse_json_to_dict`): whitespace stripped, a
```` ```json ```` fence removed only at the very start and a ```` ``` ```` only at the very end, then
JSON; the verdict counts only when `criteria_met` is the boolean true or false (not "true", not 1).
An invalid reply is asked again, the same prompt, up to `attempts` calls in all (the reference
loops forever); then the item is a `grader_error`. A judge call that fails for good (after the
engine's own transport retries) ends the item at once, with that call's error kind.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestra_ops.evals.healthbench.dataset import rubric_item_text

from orchestra_ops.client.call_errors import CallError
from orchestra_ops.runner.suite import TaskContext
from orchestra_ops.runner.templates import Template

GRADER_ERROR = "grader_error"
NO_EXPLANATION = "No explanation provided"
_FENCES = re.compile(r"^```json\s*|\s*```$")


@dataclass(frozen=True)
class JudgeSettings:
    name: str  # the role or model that grades
    temperature: float = 0.5
    max_tokens: int = 2048
    system: str = "You are a helpful assistant."  # "" sends no system message
    attempts: int = 3  # judge calls per rubric item before it is a grader_error
    extra: tuple[tuple[str, Any], ...] = ()  # more sampling parameters (`--sampling judge.KEY=VALUE`)

    def messages(self, prompt: str) -> list[dict[str, str]]:
        system = [{"role": "system", "content": self.system}] if self.system else []
        return [*system, {"role": "user", "content": prompt}]

    def params(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "max_tokens": self.max_tokens, **dict(self.extra)}


@dataclass(frozen=True)
class ItemGrade:
    criteria_met: bool | None  # None: no grade (see error)
    explanation: str | None
    attempts: int  # judge calls made for this item by this grading
    error: str | None = None
    error_kind: str | None = None  # GRADER_ERROR, or the kind of the judge call that failed


def parse_json_to_dict(text: str) -> dict[str, Any]:
    """The reference's parser: fences only at the very start and end, else `{}` on anything not JSON."""
    cleaned = _FENCES.sub("", text.strip())
    try:
        parsed = json.loads(cleaned)
    except json.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def verdict_of(text: str | None) -> tuple[bool, str] | None:
    """(criteria_met, explanation) of a valid reply, else None."""
    parsed = parse_json_to_dict(text or "")
    label = parsed.get("criteria_met")
    if label is not True and label is not False:
        return None
    explanation = parsed.get("explanation", NO_EXPLANATION)
    return label, explanation if isinstance(explanation, str) else json.dumps(explanation)


def grader_prompt(template: Template, conversation: str, item: Mapping[str, Any]) -> str:
    return template.render(conversation=conversation, rubric_item=rubric_item_text(item))


async def grade_item(ctx: TaskContext, judge: JudgeSettings, prompt: str) -> ItemGrade:
    """Ask the judge about one rubric item until it answers validly or the bound is reached."""
    messages = judge.messages(prompt)
    params = judge.params()
    last = ""
    for attempt in range(1, judge.attempts + 1):
        try:
            result = await ctx.chat(judge.name, messages, **params)
        except CallError as exc:
            return ItemGrade(None, None, attempt, f"the judge call failed: {exc.message}", exc.kind)
        verdict = verdict_of(result.content)
        if verdict is not None:
            return ItemGrade(verdict[0], verdict[1], attempt)
        last = result.content if result.content is not None else "(no content)"
    shown = last if len(last) <= 200 else last[:200] + "…"
    return ItemGrade(None, None, judge.attempts,
                     f"no valid verdict (a JSON object with a boolean criteria_met) in {judge.attempts} "
                     f"attempt(s); the last reply was {shown!r}", GRADER_ERROR)
