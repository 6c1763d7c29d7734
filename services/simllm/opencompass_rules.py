r"""What the simulated engine answers to gsm8k- and mmlu-shaped prompts: pure functions of strings.
(humaneval, bbh, hellaswag, ARC and cmmlu prompts: opencompass_more_rules.py, the same persona scheme.)

Tests import these to know every reply, and so, through OpenCompass's extraction, the exact
accuracy of each model. *The persona* is the request's ``model`` (the sim fills in its served name
when a request names none; an adapter answers as itself), so the base model and every adapter
answer differently but always the same way. ``h(s) = int(sha256(s)[:8], 16)``.

Recognising the prompt (the text of the *last* ``user`` message; few-shot turns come before it):

* **mmlu** when it holds an option block, four consecutive lines starting ``A) ``, ``B) ``, ``C) ``,
  ``D) `` that end the prompt and an ``ANSWER`` (capitals) anywhere (the zero-shot ``ANSWER: $LETTER``
  prompt), or ``A. `` … ``D. `` right after a ``Question:`` line with ``Answer:`` ending the prompt
  (the 5-shot prompt). The question ``q`` is the nearest non-empty line above ``A``, without a
  leading ``Question:``. (Other suites' prompts with answer choices do not look like either.)
* **gsm8k** when, stripped, it starts with ``Question:`` and ends with ``Answer:``. The question
  ``q`` is the first line after the last ``Question:``, stripped.

What the persona believes and whether it is right:

* ``gsm8k_truth(q) = 2 + h("gsm8k|" + q) % 2998`` and ``mmlu_truth(q) = "ABCD"[h("mmlu|" + q) % 4]``:
  the bundled synthetic datasets use these as their gold answers.
* ``skill(model) = 30 + h("skill|" + model) % 60`` (percent); a persona is right on ``q`` iff
  ``h(f"right|{dataset}|{model}|{q}") % 100 < skill(model)``.
* Its answer: the truth when right; else gsm8k ``truth + 1 + h(f"miss|{model}|{q}") % 9``, mmlu the
  letter ``1 + h(f"miss|{model}|{q}") % 3`` places after the truth (cycling ABCD).
* How it writes it, by ``style = h(f"style|{dataset}|{model}|{q}") % 10``:

  gsm8k: 0-5 ``… The answer is N``; 6 the number with a thousands comma (``1,234``, which OpenCompass
  reads as ``234``); 7 ``The answer is N`` then a made-up follow-on ``Question: …`` ending with a
  different number (OpenCompass cuts at ``Question:``); 8 ``$N.00``; 9 no number at all.
  mmlu zero-shot: 0-6 a last line ``ANSWER: X``; 7 ``answer: x`` in lower case (extracted as ``x``,
  which never equals the gold letter); 8 an earlier ``ANSWER: Y`` with ``Y`` two letters after ``X``
  before the final ``ANSWER: X`` (OpenCompass takes the first); 9 no letter at all.
  mmlu 5-shot: 0-6 ``X``; 7-8 ``The answer is X.``; 9 ``(x)`` in lower case.
"""

from __future__ import annotations

from orchestra_ops.services.simllm import opencompass_more_rules
from orchestra_ops.services.simllm.personas import LETTERS, h, skill

GSM8K = "benchmark_gsm8k"
MMLU = "benchmark_mmlu"
MORE_ROLES = ("benchmark_humaneval", "benchmark_bbh", "benchmark_hellaswag", "benchmark_arc", "benchmark_cmmlu")
ROLES = (GSM8K, MMLU, *MORE_ROLES)  # the last five: opencompass_more_rules.py
ZERO_SHOT = "0shot"
FIVE_SHOT = "5shot"

_REASONING = "Let me set out what the problem gives and combine the quantities step by step."
_MMLU_REASONING = "Let me weigh each option against what the question asks and rule out those that do not fit."


def _option_block(lines: list[str]) -> tuple[int, str] | None:
    """(index of the `A` line, delimiter) of the last four-line option block, or None."""
    found = None
    for index in range(len(lines) - 3):
        for delim in (")", "."):
            if all(lines[index + k].startswith(f"{LETTERS[k]}{delim} ") for k in range(4)):
                found = (index, delim)
    return found


def kind(text: str) -> str | None:
    """GSM8K, MMLU, one of opencompass_more_rules' kinds, or None for the text of a request's last user message."""
    more = opencompass_more_rules.kind(text)
    if more is not None:
        return more
    lines = text.rstrip().splitlines()
    block = _option_block(lines)
    if block is not None:
        index, delim = block
        if delim == ")" and index + 4 == len(lines) and "ANSWER" in text:
            return MMLU
        above = [line for line in lines[:index] if line.strip()]
        if delim == "." and above and above[-1].startswith("Question:") and text.rstrip().endswith("Answer:"):
            return MMLU
        return None
    stripped = text.strip()
    if stripped.startswith("Question:") and stripped.endswith("Answer:"):
        return GSM8K
    return None


def gsm8k_question(text: str) -> str:
    tail = text.rsplit("Question:", 1)[-1]
    return tail.strip().splitlines()[0].strip() if tail.strip() else ""


def mmlu_question(text: str) -> tuple[str, str]:
    """(q, variant) of an mmlu-shaped prompt."""
    lines = text.splitlines()
    block = _option_block(lines)
    if block is None:
        return "", ZERO_SHOT
    index, delim = block
    above = [line.strip() for line in lines[:index] if line.strip()]
    question = above[-1] if above else ""
    question = question.removeprefix("Question:").strip()
    return question, FIVE_SHOT if delim == "." else ZERO_SHOT


def gsm8k_truth(question: str) -> int:
    return 2 + h("gsm8k|" + question) % 2998


def mmlu_truth(question: str) -> str:
    return LETTERS[h("mmlu|" + question) % 4]


def is_right(dataset: str, model: str, question: str) -> bool:
    return h(f"right|{dataset}|{model}|{question}") % 100 < skill(model)


def style(dataset: str, model: str, question: str) -> int:
    return h(f"style|{dataset}|{model}|{question}") % 10


def gsm8k_value(model: str, question: str) -> int:
    truth = gsm8k_truth(question)
    return truth if is_right("gsm8k", model, question) else truth + 1 + h(f"miss|{model}|{question}") % 9


def gsm8k_reply(model: str, question: str) -> str:
    value = gsm8k_value(model, question)
    kind_ = style("gsm8k", model, question)
    if kind_ == 6:
        return f"{_REASONING}\nThe answer is {value:,}"
    if kind_ == 7:
        return (f"{_REASONING}\nThe answer is {value}\n\nQuestion: A second crate holds more parcels than the "
                f"first. How many in all?\nThe answer is {value + 17}")
    if kind_ == 8:
        return f"{_REASONING}\nThe answer is ${value}.00"
    if kind_ == 9:
        return "I could not work this one out from what is given."
    return f"{_REASONING}\nThe answer is {value}"


def mmlu_letter(model: str, question: str) -> str:
    truth = mmlu_truth(question)
    if is_right("mmlu", model, question):
        return truth
    return LETTERS[(LETTERS.index(truth) + 1 + h(f"miss|{model}|{question}") % 3) % 4]


def mmlu_reply(model: str, question: str, variant: str = ZERO_SHOT) -> str:
    letter = mmlu_letter(model, question)
    kind_ = style("mmlu", model, question)
    if variant == FIVE_SHOT:
        if kind_ <= 6:
            return letter
        if kind_ <= 8:
            return f"The answer is {letter}."
        return f"({letter.lower()})"
    if kind_ == 7:
        return f"{_MMLU_REASONING}\nanswer: {letter.lower()}"
    if kind_ == 8:
        other = LETTERS[(LETTERS.index(letter) + 2) % 4]
        return (f"At first option {other} looked right (ANSWER: {other}), but it misreads the question.\n"
                f"{_MMLU_REASONING}\nANSWER: {letter}")
    if kind_ == 9:
        return "I cannot decide between the options given."
    return f"{_MMLU_REASONING}\nANSWER: {letter}"


def answer_text(role: str, model: str, text: str) -> str:
    """The reply of persona `model` to a benchmark prompt whose last user message is `text`."""
    if role in MORE_ROLES:
        return opencompass_more_rules.answer_text(role, model, text)
    if role == MMLU:
        question, variant = mmlu_question(text)
        return mmlu_reply(model, question, variant)
    return gsm8k_reply(model, gsm8k_question(text))


