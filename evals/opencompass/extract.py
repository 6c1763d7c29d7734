r"""OpenCompass's answer extraction and comparison, quirks included, so scores match its scores.

gsm8k (`gsm8k_postprocess`, `gsm8k_dataset_postprocess`, `Gsm8kEvaluator`):
  gold       the reference text after the first `#### `, commas removed
  extracted  the text before the first `Question:`, then the last match of `\-?\d+\.\d+|\-?\d+`, or
             `NULL` when there is none. So `1,234` gives `234` and `$18.00` gives `18.00`.
  correct    the strings are equal, or `abs(float(extracted) - int(gold)) < 1e-6`; anything that
             raises (NULL, a non-integer gold) is wrong.
mmlu zero-shot (`match_answer_pattern` with `(?i)ANSWER\s*:\s*([A-D])`, `AccEvaluator`):
  extracted  group 1 of the *first* match anywhere, else ''. `answer: b` gives `b`, which is wrong:
  correct    exact string equality with the gold letter.
mmlu 5-shot (`first_option_postprocess`, `AccwithDetailsEvaluator`): patterns tried in order on
  the stripped text; the first pattern that matches and whose group 1 (else the whole match)
  holds an option letter gives the first of A, B, C, D found in it. This is the English part of
  OpenCompass's list (the answer-is forms, ANSWER:, \boxed{}, an option at the start of a line)
  and its two cushions, written here, not copied; its Chinese forms are left out.
"""

from __future__ import annotations

import re

GSM8K_NUMBER = re.compile(r"\-?\d+\.\d+|\-?\d+")
MMLU_ANSWER = re.compile(r"(?i)ANSWER\s*:\s*([A-D])")
OPTIONS = "ABCD"
_O = f"[{OPTIONS}]"
FIVE_SHOT_PATTERNS: tuple[re.Pattern[str], ...] = tuple(re.compile(p, re.DOTALL) for p in (
    rf"[Tt]he answer is:?\s+\(?({_O})\)?",
    rf"[Tt]he answer is option:?\s+\(?({_O})\)?",
    rf"[Tt]he correct answer is:?\s+\(?({_O})\)?",
    rf"[Tt]he correct answer is option:?\s+\(?({_O})\)?",
    rf"[Tt]he answer to the question is:?\s+\(?({_O})\)?",
    rf"ANSWER\s*:\s*({_O})",
    rf"\\boxed\{{({_O})\}}",
    rf"(?:^|\n)\s*({_O})(?:[.):\s]|$)",
    rf"({_O}):",
    rf"({_O})",
))


def gsm8k_gold(reference: str) -> str:
    """The gold answer of a gsm8k reference solution (raises IndexError without `#### `)."""
    return reference.split("#### ")[1].replace(",", "")


def gsm8k_extract(text: str) -> str:
    numbers = GSM8K_NUMBER.findall(text.split("Question:")[0])
    return numbers[-1] if numbers else "NULL"


def gsm8k_equal(extracted: str, gold: str) -> bool:
    try:
        return extracted == gold or abs(float(extracted) - int(gold)) < 1e-6
    except (ValueError, OverflowError):
        return False


def mmlu_extract(text: str) -> str:
    match = MMLU_ANSWER.search(text)
    return match.group(1) if match else ""


def mmlu_extract_five_shot(text: str) -> str:
    stripped = text.strip()
    for pattern in FIVE_SHOT_PATTERNS:
        match = pattern.search(stripped)
        if match is None:
            continue
        found = match.group(1) if match.groups() else match.group(0)
        for letter in OPTIONS:
            if letter in found:
                return letter
    return ""
