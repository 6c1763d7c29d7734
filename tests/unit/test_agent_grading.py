"""Answer extraction, the exact-match shortcut, both judges' parsers and HLE's calibration error."""

from __future__ import annotations

import math
import random

import pytest
from orchestra_ops.evals.agent import grading
from orchestra_ops.evals.agent.scoring import cais_metrics, calib_err


def test_extraction_per_answer_format() -> None:
    assert grading.extract("<think>x</think><answer> Paris </answer>", "answer") == "Paris"
    assert grading.extract("<answer>a</answer> then <answer>b</answer>", "answer") == "b"
    assert grading.extract("no tags at all", "answer") == "no tags at all"  # the original's split keeps it
    assert grading.extract(r"so \boxed{1} or rather \boxed{\frac{1}{2}}.", "boxed") == r"\frac{1}{2}"
    assert grading.extract("no box", "boxed") == ""
    assert grading.answer_format_for("Qwen/Qwen2.5-Math-72B-Instruct", "auto") == "boxed"
    assert grading.answer_format_for("Qwen/Qwen3-32B-FP8", "auto") == "answer"
    assert grading.answer_format_for("Qwen/Qwen2.5-Math-7B", "answer") == "answer"


def test_shortcut_empty_long_and_exact() -> None:
    assert grading.shortcut("  ", "x") == (False, "empty")
    assert grading.shortcut(" ".join(["w"] * 501), "x") == (False, "too_long")
    assert grading.shortcut(" ".join(["w"] * 500), "x") is None
    assert grading.shortcut(" PARIS ", "paris") == (True, "exact")
    assert grading.shortcut("Lyon", "Paris") is None


def test_correct_judge_parses_only_a_closed_true_or_false() -> None:
    assert grading.parse_correct("thinking <correct>True</correct>") is True
    assert grading.parse_correct("<correct>true</correct> then <correct> FALSE </correct>") is False
    assert grading.parse_correct("<correct>Tr") is None
    assert grading.parse_correct("<correct>maybe</correct>") is None
    assert grading.parse_correct(None) is None


def test_cais_judge_reads_json_or_lines() -> None:
    verdict = grading.parse_cais('{"extracted_final_answer": "7", "reasoning": "r", "correct": "yes", '
                                 '"confidence": 85, "strict": true}')
    assert verdict is not None and verdict.is_correct and verdict.confidence == 85
    lines = grading.parse_cais("extracted_final_answer: 7\nreasoning: differs\ncorrect: no\nconfidence: 40%")
    assert lines is not None and not lines.is_correct and lines.confidence == 40
    assert grading.parse_cais('{"correct": "perhaps", "confidence": 3}') is None
    assert grading.parse_cais('{"extracted_final_answer": "7", "reasoning": "r", "correct": "yes"}').confidence == 100
    assert grading.parse_cais('{"correct": "yes", "confidence": 140}') is None


def _plain(conf: list[float], right: list[bool], beta: int = 100) -> float:
    pairs = sorted(zip(conf, right, strict=True))
    n = len(pairs)
    bins = [[i * beta, (i + 1) * beta] for i in range(n // beta)]
    bins[-1][1] = n
    total = 0.0
    for lo, hi in bins[:-1]:
        chunk = pairs[lo:hi]
        diff = abs(sum(c for c, _ in chunk) / len(chunk) - sum(r for _, r in chunk) / len(chunk))
        total += len(chunk) / n * diff * diff
    return math.sqrt(total)


def test_calib_err_as_pinned() -> None:
    rng = random.Random(5)
    conf = [rng.random() for _ in range(437)]  # distinct: no tie order to depend on
    right = [rng.random() < c for c in conf]
    assert abs(calib_err(conf, right) - _plain(conf, right)) < 1e-12
    with pytest.raises(IndexError):
        calib_err(conf[:99], right[:99])
    assert calib_err(conf[:150], right[:150]) == 0.0  # the only bin is the skipped last one
    metrics = cais_metrics(37, 200, [0.5] * 99, [True] * 99)
    assert (metrics["accuracy_pct"], metrics["half_width_pct"]) == (18.5, 5.38)  # scoring.md's example
    assert metrics["calibration_error"] is None and "at least 100" in metrics["calibration_note"]
