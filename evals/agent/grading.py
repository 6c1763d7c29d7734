r"""Answer extraction and grading (§2.6 answer, §3; scoring.md B3-B4, B6).

Extraction, per answer format: `answer` takes the text after the last `<answer>` up to
`</answer>`; `boxed` the text after the last `\boxed{` up to the last `}` after it (nested braces
survive); a reply without the marker gives '' for boxed and the whole reply for `answer` (the
original's split does the same), stripped.

Grading under the ToolOrchestra protocol: an empty prediction or one of more than 500
space-separated words is wrong; a case-insensitive exact match (after strip) is right; otherwise
the judge is asked with the `<correct>` template, and its verdict is the text after the last
`<correct>` up to `</correct>`, compared case-insensitively with "true". A reply without a closing
tag, or with a verdict other than true/false, does not parse: it is asked again, up to the bound.

Under `--judge-protocol cais` every answer's full response is judged with the CAIS HLE template
(structured output: extracted_final_answer, reasoning, correct yes/no, confidence 0-100, strict):
JSON is read first, else the `name: value` lines the template asks for.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from orchestra_ops.evals.agent.protocol import MAX_ANSWER_WORDS

ANSWER_FORMATS = ("auto", "answer", "boxed")

# The CAIS judge's structured output (scoring.md B4), sent as response_format
CAIS_SCHEMA: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "ExtractedAnswer",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "extracted_final_answer": {"type": "string"},
                "reasoning": {"type": "string"},
                "correct": {"type": "string", "enum": ["yes", "no"]},
                "confidence": {"type": "integer"},
                "strict": {"type": "boolean", "enum": [True]},
            },
            "required": ["extracted_final_answer", "reasoning", "correct", "confidence", "strict"],
            "additionalProperties": False,
        },
    },
}
_LINE_FIELD = re.compile(r"(?im)^\s*\**(extracted_final_answer|reasoning|correct|confidence)\**\s*:\s*(.*)$")


def answer_format_for(model_name: str, choice: str) -> str:
    """`auto`: \\boxed{} for Qwen2.5-Math models (the original's math experts), <answer> otherwise
    (the OSS protocol's answer experts)."""
    if choice != "auto":
        return choice
    return "boxed" if re.search(r"qwen2\.5-math", model_name, re.IGNORECASE) else "answer"


def extract(response: str, answer_format: str) -> str:
    if answer_format == "boxed":
        if "\\boxed{" not in response:
            return ""
        rest = response.rsplit("\\boxed{", 1)[1]
        return rest[: rest.rfind("}")].strip() if "}" in rest else rest.strip()
    return response.split("<answer>")[-1].split("</answer>")[0].strip()


def shortcut(pred: str, gold: str) -> tuple[bool, str] | None:
    """(correct, how) when no judge is needed: empty or too long (wrong), exact match (right)."""
    if not pred.strip():
        return False, "empty"
    if len(pred.split(" ")) > MAX_ANSWER_WORDS:
        return False, "too_long"
    if pred.strip().lower() == gold.strip().lower():
        return True, "exact"
    return None


def parse_correct(reply: str | None) -> bool | None:
    """The <correct> judge's verdict, or None when the reply does not parse."""
    if not reply or "<correct>" not in reply:
        return None
    tail = reply.rsplit("<correct>", 1)[1]
    if "</correct>" not in tail:
        return None
    verdict = tail.split("</correct>", 1)[0].strip().lower()
    return {"true": True, "false": False}.get(verdict)


@dataclass(frozen=True)
class CaisVerdict:
    extracted_final_answer: str
    reasoning: str
    correct: str  # "yes" | "no"
    confidence: int

    @property
    def is_correct(self) -> bool:
        return "yes" in self.correct  # the reference's substring test

    def to_json(self) -> dict[str, Any]:
        return {"extracted_final_answer": self.extracted_final_answer, "reasoning": self.reasoning,
                "correct": self.correct, "confidence": self.confidence}


def parse_cais(reply: str | None) -> CaisVerdict | None:
    """The CAIS judge's fields from JSON (structured output) or `name: value` lines; None if they do not parse."""
    if not reply:
        return None
    fields: dict[str, Any] = {}
    text = reply.strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    try:
        data = json.loads(text)
        if isinstance(data, dict):
            fields = data
    except ValueError:
        fields = {m.group(1).lower(): m.group(2).strip() for m in _LINE_FIELD.finditer(reply)}
    correct = str(fields.get("correct", "")).strip().lower()
    if correct not in ("yes", "no"):
        return None
    raw_confidence = fields.get("confidence", 100)
    match = re.search(r"\d+", str(raw_confidence))
    if match is None:
        return None
    confidence = int(match.group(0))
    if not 0 <= confidence <= 100:
        return None
    return CaisVerdict(str(fields.get("extracted_final_answer", "None")), str(fields.get("reasoning", "")),
                       correct, confidence)
