r"""The rubric judge of the simulated engine (HealthBench's grader): one deterministic verdict per item.

A request is a rubric-judge request when its text mentions ``criteria_met`` (rules.classify). The
verdict is a pure function of two things the grader prompt holds, so a test knows every grade:

*The graded token* ``T``: the last answer token (``sim-`` + 8 hex digits) anywhere in the request,
which is the response being graded when the sim wrote it; a request without one uses
``answer_token(question)`` of its first user message (rules.py).

*The criterion* ``C``: the rubric item as the grader template renders it, ``[points] criterion``.
It is the first line of the form ``[<number>] <text>`` after the last ``# Rubric item`` heading
(the section heading of HealthBench's grader template, ours and the published one alike); without
that heading, the last such line anywhere in the request. ``C`` is ``<text>`` with its whitespace
collapsed (the points are not part of it); no such line gives ``C = ""``.

*The verdict*: ``criteria_met(T, C)`` is true iff
``int(sha256(T + "\n" + C)[:8], 16) % 100 < (MET_PERCENT_RIGHT if token_is_right(T) else MET_PERCENT_WRONG)``
(70 and 30): a response the sim grades right meets about 70 % of criteria, a wrong one about 30 %,
and two items of one response get independent verdicts. The sign of the points plays no part, so
an undesirable (negative) criterion is met as often as any other.

The reply is the JSON object ``{"explanation": "...", "criteria_met": true|false}`` with nothing
around it; ``--malformed-rate`` (faults.py) cuts a judge reply in half, which is not valid JSON.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from orchestra_ops.services.simllm.replies import token_is_right

MET_PERCENT_RIGHT = 70
MET_PERCENT_WRONG = 30
_HEADING_RE = re.compile(r"^#\s*Rubric item\s*$", re.MULTILINE | re.IGNORECASE)
_ITEM_RE = re.compile(r"^\s*\[(-?\d+(?:\.\d+)?)\]\s*(.*\S)\s*$", re.MULTILINE)


def criteria_met(token: str, criterion: str) -> bool:
    """Whether the sim's rubric judge says a response with answer token `token` meets `criterion`."""
    key = f"{token}\n{' '.join(criterion.split())}"
    share = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % 100
    return share < (MET_PERCENT_RIGHT if token_is_right(token) else MET_PERCENT_WRONG)


def criterion_of(prompt: str) -> str:
    """The criterion text of the rubric item a grader prompt asks about (see the module docstring)."""
    headings = list(_HEADING_RE.finditer(prompt))
    if headings:
        match = _ITEM_RE.search(prompt, headings[-1].end())
    else:
        found = list(_ITEM_RE.finditer(prompt))
        match = found[-1] if found else None
    return " ".join(match.group(2).split()) if match else ""


def rubric_verdict(prompt: str, token: str) -> dict[str, Any]:
    """The reply object for one rubric item: `{"explanation", "criteria_met"}`."""
    criterion = criterion_of(prompt)
    met = criteria_met(token, criterion)
    shown = criterion if len(criterion) <= 80 else criterion[:77] + "..."
    explanation = (f"The response meets the criterion: {shown}" if met
                   else f"The response does not meet the criterion: {shown}")
    return {"explanation": explanation, "criteria_met": met}


def rubric_reply_text(prompt: str, token: str) -> str:
    return json.dumps(rubric_verdict(prompt, token))
