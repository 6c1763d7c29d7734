"""OpenCompass's extraction and comparison, quirk by quirk (reference: opencompass-lora.md 1.2, 1.3)."""

from __future__ import annotations

import pytest
from orchestra_ops.evals.opencompass.extract import (
    gsm8k_equal,
    gsm8k_extract,
    gsm8k_gold,
    mmlu_extract,
    mmlu_extract_five_shot,
)
from orchestra_ops.evals.opencompass.gsm8k import Gsm8kSuite

from orchestra_ops.client.chat import ChatResult


@pytest.mark.parametrize(("text", "extracted"), [
    ("14 * 6 = 84, and 84 + 54 = 138.\nThe answer is 138", "138"),
    ("The answer is 1,000", "000"),  # the comma splits the number
    ("She pays $18.00 in total.", "18.00"),
    ("The answer is 42\n\nQuestion: next one? The answer is 7", "42"),  # cut at the first Question:
    ("Question: 5 apples", "NULL"),  # nothing before Question:
    ("no digits at all", "NULL"),
    ("It drops to -3.5 degrees, then -4", "-4"),
    ("The answer is 12.", "12"),
])
def test_gsm8k_extract(text: str, extracted: str) -> None:
    assert gsm8k_extract(text) == extracted


def test_gsm8k_gold_and_comparison() -> None:
    assert gsm8k_gold("48 / 2 = 24\n#### 1,200") == "1200"
    assert gsm8k_equal("1200", "1200") and gsm8k_equal("1200.0", "1200") and gsm8k_equal("18.00", "18")
    assert not gsm8k_equal("000", "1000") and not gsm8k_equal("NULL", "5") and not gsm8k_equal("5.000001", "5")
    assert gsm8k_equal("2.5", "2.5")  # equal strings win before int(gold) could raise
    assert not gsm8k_equal("2.50", "2.5")  # int("2.5") raises: wrong


@pytest.mark.parametrize(("text", "extracted"), [
    ("Reasoning…\nANSWER: B", "B"),
    ("answer: b", "b"),  # (?i) finds it; the lowercase letter never equals the gold
    ("First I thought ANSWER: C, but no.\nANSWER: A", "C"),  # the first match wins
    ("Answer :  D", "D"),
    ("The answer is B", ""),
])
def test_mmlu_zero_shot(text: str, extracted: str) -> None:
    assert mmlu_extract(text) == extracted


@pytest.mark.parametrize(("text", "extracted"), [
    ("B", "B"),
    ("The answer is C.", "C"),
    ("The correct answer is (D)", "D"),
    ("ANSWER: A", "A"),
    ("\\boxed{B}", "B"),
    ("  C. because it fits", "C"),
    ("(b)", ""),
    ("I think D: it fits", "D"),
])
def test_mmlu_five_shot(text: str, extracted: str) -> None:
    assert mmlu_extract_five_shot(text) == extracted


@pytest.mark.parametrize(("message", "setting", "prediction"), [
    ({"content": "42", "reasoning": "think"}, "keep", "think</think>42"),  # vLLM 0.32's key
    ({"content": "42", "reasoning_content": "think"}, "keep", "think</think>42"),  # older servers' key
    ({"content": "42", "reasoning": None}, "keep", "42"),  # what vLLM sends without a reasoning parser
    ({"content": "42", "reasoning": "think"}, "drop", "42"),
])
def test_prediction_keeps_vllms_message_reasoning(message: dict[str, object], setting: str,
                                                  prediction: str) -> None:
    suite = Gsm8kSuite()
    suite.settings = {"reasoning": setting}
    result = ChatResult(content=str(message["content"]), message=message, finish_reason="stop", prompt_tokens=1,
                        completion_tokens=1, replica="r", attempts=1, latency_s=0.0)
    assert suite.prediction(result) == prediction
