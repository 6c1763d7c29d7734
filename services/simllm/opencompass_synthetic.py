"""Synthetic datasets in the file layouts OpenCompass's loaders read, with the sim's truths as gold answers.

Our own made-up items (never real benchmark data): the bundled sets under evals/opencompass/data/ are written by
`scripts/make_oc_synthetic.py` from these functions, and tests write their own with chosen questions.
Every gold answer is opencompass_more_rules' truth for that question, so a persona's score is known exactly.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path

from orchestra_ops.services.simllm import opencompass_more_rules as bm

BBH_FREE_FORM_ASKS = {  # what a free-form subset's synthetic question asks (its answer kind)
    "navigate": "yes or no", "sports_understanding": "yes or no", "causal_judgement": "yes or no",
    "web_of_lies": "yes or no", "boolean_expressions": "true or false", "formal_fallacies": "valid or invalid",
}


def _jsonl(path: Path, rows: Sequence[object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def humaneval_problem(name: str, note: str = "") -> dict[str, str]:
    shift = bm.humaneval_shift(name)
    extra = f"    {note}\n" if note else ""
    prompt = (f"def {name}(x: int) -> int:\n    \"\"\"Return x moved up by this problem's own offset.\n{extra}"
              f"    >>> {name}(0) == {shift}\n    True\n    \"\"\"\n")
    test = (f"def check(candidate):\n    assert candidate(0) == {shift}\n    assert candidate(5) == {5 + shift}\n"
            f"    assert candidate(-3) == {shift - 3}\n")
    return {"task_id": f"Synthetic/{name}", "prompt": prompt, "entry_point": name,
            "canonical_solution": f"    return x + {shift}\n", "test": test}


def write_humaneval(path: Path, problems: Sequence[dict[str, str]]) -> Path:
    _jsonl(path, problems)
    return path


def bbh_example(subset: str, index: int, multiple_choice: bool) -> dict[str, str]:
    if multiple_choice:
        count = 3 + index % 3
        options = "\n".join(f"({'ABCDEFG'[k]}) synthetic choice {k + 1} of item {index}" for k in range(count))
        q = f"Synthetic {subset} item {index}: which choice does the made-up rule pick?\nOptions:\n{options}"
        return {"input": q, "target": f"({bm.bbh_truth(q)})"}
    asks = BBH_FREE_FORM_ASKS.get(subset)
    q = (f"Synthetic {subset} item {index}: does the made-up rule hold, {asks}?" if asks
         else f"Synthetic {subset} item {index}: what number does the made-up rule give?")
    return {"input": q, "target": bm.bbh_truth(q)}


def write_bbh(root: Path, subsets: dict[str, list[dict[str, str]]]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for subset, examples in subsets.items():
        (root / f"{subset}.json").write_text(json.dumps({"examples": examples}, indent=1) + "\n", encoding="utf-8")
    return root


def choice_row(dataset: str, q: str, endings: Sequence[str]) -> tuple[str, list[str], int]:
    return q, list(endings), "ABCD".index(bm.choice_truth(dataset, q))


def write_hellaswag(root: Path, questions: Sequence[str], shots: Sequence[str]) -> Path:
    def row(q: str, gold: int | None = None) -> dict[str, object]:
        endings = [f"ending {k + 1} of the synthetic scene" for k in range(4)]
        truth = "ABCD".index(bm.choice_truth("hellaswag", q)) if gold is None else gold
        return {"query": f"Synthetic activity: {q}", "choices": endings, "gold": truth}
    _jsonl(root / "hellaswag.jsonl", [row(q) for q in questions])
    _jsonl(root / "hellaswag_train_sampled25.jsonl", [row(q, i % 4) for i, q in enumerate(shots)])
    return root


def arc_line(dataset: str, q: str, labels: str = "ABCD") -> dict[str, object]:
    choices = [{"label": label, "text": f"synthetic answer {label}"} for label in labels]
    truth = "ABCD".index(bm.choice_truth("arc", q)) if len(labels) == 4 else 0
    return {"id": q[:20], "question": {"stem": q, "choices": choices}, "answerKey": labels[truth]}


def write_arc(root: Path, challenge: Sequence[dict[str, object]], easy: Sequence[dict[str, object]]) -> Path:
    _jsonl(root / "ARC-c" / "ARC-Challenge-Dev.jsonl", challenge)
    _jsonl(root / "ARC-e" / "ARC-Easy-Dev.jsonl", easy)
    return root


def write_cmmlu(root: Path, subjects: dict[str, list[str]]) -> Path:
    (root / "test").mkdir(parents=True, exist_ok=True)
    for subject, questions in subjects.items():
        with open(root / "test" / f"{subject}.csv", "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["", "Question", "A", "B", "C", "D", "Answer"])
            for i, q in enumerate(questions):
                writer.writerow([i, q, "甲，一", "乙", "丙", "丁", bm.choice_truth("cmmlu", q)])
    return root
