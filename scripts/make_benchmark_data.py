"""Write the bundled synthetic gsm8k and mmlu sets (evals/opencompass/data/) in the layouts users have.

The questions are stand-ins, not arithmetic or knowledge: each gold answer is what the simulated
engine believes (services/simllm/opencompass_rules.py: gsm8k_truth, mmlu_truth), so an eval over
`ops serve sim` scores exactly what the rules say. Golds of 1,000 and more carry a thousands comma
half the time, as real gsm8k golds do (OpenCompass removes it). Run: `.venv/bin/python scripts/make_benchmark_data.py`.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from orchestra_ops.services.simllm.opencompass_rules import gsm8k_truth, mmlu_truth

ROOT = Path(__file__).resolve().parent.parent / "evals" / "opencompass" / "data"
GSM8K_ROWS = 40
MMLU_SUBJECTS = ("abstract_algebra", "philosophy", "sociology", "marketing")  # stem, humanities, social, other
MMLU_ROWS = 10


def gsm8k_question(i: int) -> str:
    return (f"Synthetic problem {i}: a depot sorts its parcels into lots and ships some of them each day. "
            f"How many parcels are left in lot {i} at the end of the week?")


def gsm8k_answer(question: str, i: int) -> str:
    gold = gsm8k_truth(question)
    shown = f"{gold:,}" if gold >= 1000 and i % 2 else str(gold)
    return f"A synthetic stand-in: the simulated engine's rules hold its answer.\n#### {shown}"


def mmlu_question(subject: str, split: str, i: int) -> str:
    return f"Synthetic {subject.replace('_', ' ')} {split} question {i}: which option holds?"


def main() -> None:
    gsm8k = ROOT / "gsm8k"
    gsm8k.mkdir(parents=True, exist_ok=True)
    with open(gsm8k / "test.jsonl", "w", encoding="utf-8") as handle:
        for i in range(GSM8K_ROWS):
            question = gsm8k_question(i)
            handle.write(json.dumps({"question": question, "answer": gsm8k_answer(question, i)}) + "\n")
    for split, rows in (("test", MMLU_ROWS), ("dev", 5)):
        folder = ROOT / "mmlu" / split
        folder.mkdir(parents=True, exist_ok=True)
        for subject in MMLU_SUBJECTS:
            with open(folder / f"{subject}_{split}.csv", "w", encoding="utf-8", newline="") as handle:
                writer = csv.writer(handle)
                for i in range(rows):
                    question = mmlu_question(subject, split, i)
                    options = [f"the {word} option, about {subject.replace('_', ' ')}"
                               for word in ("first", "second", "third", "fourth")]
                    writer.writerow([question, *options, mmlu_truth(question)])


if __name__ == "__main__":
    main()
