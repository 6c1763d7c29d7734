"""The gsm8k suite: OpenCompass's gsm8k_gen (config 1d7fe4) over the fleet.

Prompt: four worked examples as user/assistant turns, then the question, every user turn the
`question` template (`Question: {question}` … `Answer:`), every assistant turn a worked solution
ending `The answer is N` (the `shots` template, JSONL of {"question", "answer"}). Both are data
files; `--template question=PATH --template shots=PATH` puts OpenCompass's own text in. Greedy,
max_tokens 512 (the dataset's max_out_len). Scored as extract.py says.

Dataset: gsm8k's `test.jsonl` (lines {"question", "answer"} with the answer ending `#### N`), or the
directory holding it. Sample ids are `gsm8k/<row>` (the row in the file, from 0).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestra_ops.evals.bundled import packaged
from orchestra_ops.evals.opencompass.extract import gsm8k_equal, gsm8k_extract, gsm8k_gold
from orchestra_ops.evals.opencompass.suite import SingleDatasetSuite, common_options

from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.dataset import Sample, read_jsonl, text_fields_problem

DATASET = "gsm8k"


class Gsm8kSuite(SingleDatasetSuite):
    """gsm8k as OpenCompass's gsm8k_gen scores it: 4-shot chat turns, the last number before any `Question:`."""

    dataset_name = DATASET

    name = "gsm8k"
    default_dataset = packaged("opencompass/data/gsm8k")
    template_files: Mapping[str, str] = {"question": packaged("opencompass/templates/gsm8k_question.txt"),
                      "shots": packaged("opencompass/templates/gsm8k_shots.jsonl")}
    template_fields: Mapping[str, tuple[str, ...]] = {"question": ("question",)}
    options = common_options(512)

    def __init__(self) -> None:
        super().__init__()
        self.shots: list[tuple[str, str]] = []

    def check(self, options: Mapping[str, Any]) -> None:
        template = self.templates["shots"]
        shots = []
        for number, line in enumerate(template.text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                shot = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{template.source}:{number}: not valid JSON: {exc.msg}") from None
            if not isinstance(shot, dict) or not isinstance(shot.get("question"), str) \
                    or not isinstance(shot.get("answer"), str):
                raise ConfigError(f"{template.source}:{number}: a shot is {{\"question\": …, \"answer\": …}}")
            shots.append((shot["question"], shot["answer"]))
        self.shots = shots

    def load(self, path: Path, *, dedupe: bool) -> list[Sample]:
        source = path / "test.jsonl" if path.is_dir() else path
        if path.is_dir() and not source.exists():
            raise ConfigError(f"{source}: no such file (a gsm8k directory holds test.jsonl)")
        samples: list[Sample] = []
        for number, row in read_jsonl(source, "gsm8k"):
            problem = text_fields_problem(row, ("question", "answer"))
            if problem:
                raise ConfigError(f"{source}:{number}: {problem}; a gsm8k line is "
                                  "{\"question\": …, \"answer\": \"… #### 7\"}")
            if "#### " not in row["answer"]:
                raise ConfigError(f"{source}:{number}: the answer has no '#### ' before the final number")
            index = len(samples)
            samples.append({"id": f"{DATASET}/{index}", "index": index, "question": row["question"],
                            "answer": row["answer"]})
        if not samples:
            raise ConfigError(f"{source}: no samples")
        return samples

    def messages(self, unit: Sample) -> list[dict[str, str]]:
        question = self.templates["question"]
        turns: list[dict[str, str]] = []
        for shot_question, shot_answer in self.shots:
            turns.append({"role": "user", "content": question.render(question=shot_question)})
            turns.append({"role": "assistant", "content": shot_answer})
        turns.append({"role": "user", "content": question.render(question=unit["question"])})
        return turns

    def extract(self, unit: Sample, prediction: str) -> str:
        return gsm8k_extract(prediction)

    def gold(self, unit: Sample) -> str:
        return gsm8k_gold(unit["answer"])

    def raw_gold(self, unit: Sample) -> str:
        return str(unit["answer"])

    def is_correct(self, extracted: str, gold: str) -> bool:
        return gsm8k_equal(extracted, gold)

    def version_templates(self) -> list[str]:
        return ["question", "shots"]
