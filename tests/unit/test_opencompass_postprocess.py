"""OpenCompass's postprocessors of the humaneval, bbh, hellaswag, ARC and cmmlu configs, quirk by quirk
(opencompass/utils/text_postprocessors.py, opencompass/datasets/bbh.py and humaneval.py at a5acc4bb)."""

from __future__ import annotations

import pytest
from orchestra_ops.evals.opencompass.postprocess import bbh_freeform, bbh_mcq, cmmlu_answer, first_option, humaneval_v2


@pytest.mark.parametrize(("text", "extracted"), [
    ("B", "B"),
    ("  C\n", "C"),
    ("The answer is D.", "D"),
    ("答案是C", "C"),
    ("answer: b", ""),  # (?i)ANSWER matches, but [ABCD] is upper case only
    ("ANSWER: A", "A"),
    ("The answer is **B**", "B"),
    ("(b)", ""),
    ("Option 1: C fits", "C"),  # `1.\s?(.*?)$`: the text after any "1" and a character
    ("Both D and A look right", "B"),  # the cushion `([ABCD])`: the B of "Both"
    ("then D and A look right", "D"),
    ("I think D: it fits", "D"),
    ("", ""),
])
def test_first_option(text: str, extracted: str) -> None:
    assert first_option(text) == extracted


@pytest.mark.parametrize(("text", "extracted"), [
    ("推理。\n答案: B", "B"), ("答案：B", ""), ("答案: **C**", "C"), ("答案: d", "d"), ("无法判断", ""),
    ("答案 : (A)", "A"),
])
def test_cmmlu_answer(text: str, extracted: str) -> None:
    assert cmmlu_answer(text) == extracted


@pytest.mark.parametrize(("text", "extracted"), [
    ("Step by step. So the answer is (C).", "C"),
    ("So the answer is B.", "B"),
    ("So the answer is (b).", "(b)."),  # no capital: the tail comes back unchanged
    ("Comparing (D) first; I pick (A).", "D"),  # no "answer is": the first (X) of the whole text
    ("I cannot tell.", "I"),
    ("(E)", "E"),  # a target
])
def test_bbh_mcq(text: str, extracted: str) -> None:
    assert bbh_mcq(text) == extracted


@pytest.mark.parametrize(("text", "extracted"), [
    ("So the answer is Yes.", "Yes"),
    ("The answer is: no", "No"),
    ("So the answer is **valid**.", "valid"),
    ("So the answer is 12.\nOn second thought, the answer is 13.", "13"),  # the last one counts
    ("So the answer is 1, 234.", "1, 234"),  # commas between digits stay
    ("So the answer is apple, banana,  cherry.", "apple banana cherry"),
    ("true, obviously", "True"),
    ("no answer here\nsecond line", "No"),  # a leading no/yes word wins, whatever follows
    ("nothing fits\nsecond line", "nothing fits"),
])
def test_bbh_freeform(text: str, extracted: str) -> None:
    assert bbh_freeform(text) == extracted


@pytest.mark.parametrize(("text", "extracted"), [
    ("```python\ndef f(x):\n    return x\n```", "def f(x):\n    return x\n"),
    ("```\nprint(1)\n```\n```python\ndef f(): pass\n```", "print(1)\n"),  # the first block
    ("    return x + 1\n", "return x + 1\n"),  # left-stripped: the body loses its indentation
    ("```python def f(): pass```", "```python def f(): pass```"),  # a fence needs its newline
])
def test_humaneval_v2(text: str, extracted: str) -> None:
    assert humaneval_v2(text) == extracted
