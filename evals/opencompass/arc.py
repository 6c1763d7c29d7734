"""The arc suite: OpenCompass's ARC_c_gen and ARC_e_gen (both config 1e0de5) over the fleet.

Read from OpenCompass a5acc4bb: opencompass/configs/datasets/ARC_c/ARC_c_gen.py -> ARC_c_gen_1e0de5.py and
ARC_e/ARC_e_gen.py -> ARC_e_gen_1e0de5.py (one HUMAN turn `Question: …` with the four options `A. …` to
`D. …` and `Answer:`, zero-shot, GenInferencer with the model's max_out_len, AccEvaluator, pred_postprocessor
first_option_postprocess with options ABCD, abbrs `ARC-c` and `ARC-e`); opencompass/datasets/arc.py
(ARCDataset: JSONL lines {"question": {"stem", "choices": [{"label", "text"}…]}, "answerKey"}; a question
without exactly four choices is skipped; the gold letter is "ABCD"[index of answerKey among the labels],
so labels 1-4 work too); opencompass/utils/datasets_info.py (the local files
ARC/ARC-c/ARC-Challenge-Dev.jsonl and ARC/ARC-e/ARC-Easy-Dev.jsonl).

Dataset: the folder holding ARC-c/ and ARC-e/ (OpenCompass's data/ARC), or one JSONL file (then its
dataset name comes from the file name: `Easy` in it means ARC-e). `--subset c|e` keeps one. Sample ids
are `ARC-c/<row>` (the row among the rows kept, from 0). The prompt is the `question` template (a data
file). Scored with first_option (postprocess.py), exact match with the gold letter; metric `accuracy`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestra_ops.evals.bundled import packaged
from orchestra_ops.evals.opencompass.postprocess import first_option
from orchestra_ops.evals.opencompass.sampling import seeded_sample
from orchestra_ops.evals.opencompass.suite import OpenCompassSuite, common_options

from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.dataset import Sample, read_jsonl
from orchestra_ops.runner.suite import SuiteOption

FILES = {"ARC-c": "ARC-c/ARC-Challenge-Dev.jsonl", "ARC-e": "ARC-e/ARC-Easy-Dev.jsonl"}
FIELDS = ("question", "textA", "textB", "textC", "textD")


def load_arc(source: Path, dataset: str) -> list[Sample]:
    samples: list[Sample] = []
    for number, row in read_jsonl(source, "ARC"):
        question = row.get("question") if isinstance(row, dict) else None
        if not isinstance(question, dict) or not isinstance(question.get("stem"), str) \
                or not isinstance(question.get("choices"), list) or not isinstance(row.get("answerKey"), str):
            raise ConfigError(f"{source}:{number}: an ARC line is {{\"question\": {{\"stem\", \"choices\"}}, "
                              "\"answerKey\"}")
        choices = question["choices"]
        if len(choices) != 4:  # ARCDataset skips these
            continue
        if not all(isinstance(c, dict) and isinstance(c.get("label"), str) and isinstance(c.get("text"), str)
                   for c in choices):
            raise ConfigError(f"{source}:{number}: a choice is {{\"label\": …, \"text\": …}}")
        labels = [c["label"] for c in choices]
        if row["answerKey"] not in labels:
            raise ConfigError(f"{source}:{number}: answerKey {row['answerKey']!r} is not one of the labels "
                              f"{', '.join(labels)}")
        index = len(samples)
        samples.append({"id": f"{dataset}/{index}", "dataset": dataset, "index": index,
                        "question": question["stem"], **{f"text{'ABCD'[i]}": c["text"] for i, c in enumerate(choices)},
                        "target": "ABCD"[labels.index(row["answerKey"])]})
    return samples


class ArcSuite(OpenCompassSuite):
    """ARC-c and ARC-e as OpenCompass's ARC_*_gen score them: zero-shot, the first option letter found."""

    name = "arc"
    default_dataset = packaged("opencompass/data/ARC")
    template_files: Mapping[str, str] = {"question": packaged("opencompass/templates/arc_question.txt")}
    template_fields: Mapping[str, tuple[str, ...]] = {"question": FIELDS}
    options = (
        SuiteOption("subsets", "--subset", "choice", "Only ARC-c or ARC-e (repeat for both; default both).",
                    choices=("c", "e"), multiple=True),
        *common_options(4096),
    )

    def load(self, path: Path, *, dedupe: bool) -> list[Sample]:
        if path.is_file():
            return load_arc(path, "ARC-e" if "Easy" in path.name else "ARC-c")
        if not path.is_dir():
            raise ConfigError(f"{path}: no such ARC file or directory")
        root = path / "ARC" if (path / "ARC").is_dir() else path
        found = {name: root / rel for name, rel in FILES.items() if (root / rel).is_file()}
        if not found:
            raise ConfigError(f"{root}: expected OpenCompass's ARC layout, {' and/or '.join(FILES.values())}")
        samples = [s for name, source in found.items() for s in load_arc(source, name)]
        if not samples:
            raise ConfigError(f"{root}: no ARC question with four choices")
        return samples

    def select(self, samples: list[Sample], options: Mapping[str, Any]) -> list[Sample]:
        wanted = [f"ARC-{s}" for s in options.get("subsets") or ()] or list(FILES)
        present = {s["dataset"] for s in samples}
        missing = [w for w in wanted if w not in present]
        if missing and options.get("subsets"):
            raise ConfigError(f"--subset {missing[0][-1]}: {missing[0]} is not in the dataset")
        seed, count = int(options.get("seed") or 0), options.get("sample")
        return [s for name in wanted if name in present
                for s in seeded_sample([s for s in samples if s["dataset"] == name], count, seed, name)]

    def dataset_of(self, unit: Sample) -> str:
        return str(unit["dataset"])

    def messages(self, unit: Sample) -> list[dict[str, str]]:
        return [{"role": "user", "content": self.templates["question"].render(**{f: str(unit[f]) for f in FIELDS})}]

    def extract(self, unit: Sample, prediction: str) -> str:
        return first_option(prediction)

    def gold(self, unit: Sample) -> str:
        return str(unit["target"])
