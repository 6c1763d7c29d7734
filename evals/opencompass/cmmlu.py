"""The cmmlu suite: OpenCompass's cmmlu_gen (config cmmlu_0shot_cot_gen_305931) over the fleet.

Read from OpenCompass a5acc4bb: opencompass/configs/datasets/cmmlu/cmmlu_gen.py imports
cmmlu_0shot_cot_gen_305931.py: per subject one HUMAN turn (an instruction naming the subject in Chinese and
asking for a last line `答案: $选项`, the question, then `A) …` to `D) …`), zero-shot, GenInferencer with the
model's max_out_len, AccEvaluator, pred_postprocessor match_answer_pattern with
`(?i)答案\\s*:\\s*[\\W]*([A-D])[\\W]*`; abbrs `cmmlu-<subject>`. opencompass/datasets/cmmlu.py (CMMLUDataset):
DIR/test/<subject>.csv, a header row skipped, rows of 7 columns (index, question, A, B, C, D, answer).
Groups: opencompass/configs/summarizers/groups/cmmlu.py (cmmlu_data.py), each the naive mean of its subjects.

The prompt is the `question` template (a data file) with `{subject}` the Chinese subject name. Sample ids
are `<subject>/<row>`. Scored with cmmlu_answer (postprocess.py), exact match; metric `accuracy`;
`--summary-groups` writes the group rows into summary/summary.csv (a group needs all its subjects).
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestra_ops.evals.bundled import packaged
from orchestra_ops.evals.opencompass import cmmlu_data
from orchestra_ops.evals.opencompass.groups import Group
from orchestra_ops.evals.opencompass.postprocess import cmmlu_answer
from orchestra_ops.evals.opencompass.sampling import by_subject, sample_subjects
from orchestra_ops.evals.opencompass.suite import OpenCompassSuite, common_options

from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.dataset import Sample
from orchestra_ops.runner.suite import SuiteOption

PREFIX = "cmmlu-"
FIELDS = ("question", "A", "B", "C", "D")


def load_subject(source: Path, subject: str) -> list[Sample]:
    try:
        with open(source, encoding="utf-8", newline="") as handle:
            rows = list(csv.reader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(f"{source}: cannot read: {exc}") from None
    samples: list[Sample] = []
    for number, row in enumerate(rows[1:], start=2):  # the header row is skipped
        if len(row) != 7:
            raise ConfigError(f"{source}: row {number}: {len(row)} columns; CMMLU rows are "
                              "index,question,A,B,C,D,answer")
        if row[6] not in "ABCD" or len(row[6]) != 1:
            raise ConfigError(f"{source}: row {number}: answer {row[6]!r} is not one of A, B, C, D")
        index = len(samples)
        samples.append({"id": f"{subject}/{index}", "subject": subject, "index": index,
                        **dict(zip(FIELDS, row[1:6], strict=True)), "target": row[6]})
    return samples


class CmmluSuite(OpenCompassSuite):
    """cmmlu as OpenCompass's cmmlu_gen scores it: per subject, `答案: X`, and the group means."""

    name = "cmmlu"
    default_dataset = packaged("opencompass/data/cmmlu")
    template_files: Mapping[str, str] = {"question": packaged("opencompass/templates/cmmlu_question.txt")}
    template_fields: Mapping[str, tuple[str, ...]] = {"question": ("subject", *FIELDS)}
    options = (
        SuiteOption("subjects", "--subject", "str", "Only this subject (repeat for several).", multiple=True),
        SuiteOption("summary_groups", "--summary-groups", "flag", "Also write the cmmlu group rows into "
                    "summary/summary.csv (OpenCompass's cmmlu summary groups).", default=False),
        *common_options(4096),
    )

    def load(self, path: Path, *, dedupe: bool) -> list[Sample]:
        root = path / "test"
        if not root.is_dir():
            raise ConfigError(f"{path}: expected CMMLU's layout, {path}/test/<subject>.csv")
        files = sorted(root.glob("*.csv"))
        unknown = [f.stem for f in files if f.stem not in cmmlu_data.NAMES]
        if unknown:
            raise ConfigError(f"{root / (unknown[0] + '.csv')}: '{unknown[0]}' is not a CMMLU subject")
        samples = [s for source in files for s in load_subject(source, source.stem)]
        if not samples:
            raise ConfigError(f"{root}: no samples")
        return samples

    def select(self, samples: list[Sample], options: Mapping[str, Any]) -> list[Sample]:
        grouped, wanted = by_subject(samples, options)
        return sample_subjects(grouped, wanted, options)

    def dataset_of(self, unit: Sample) -> str:
        return PREFIX + str(unit["subject"])

    def messages(self, unit: Sample) -> list[dict[str, str]]:
        values = {f: str(unit[f]) for f in FIELDS}
        return [{"role": "user", "content": self.templates["question"].render(
            subject=cmmlu_data.NAMES[unit["subject"]], **values)}]

    def extract(self, unit: Sample, prediction: str) -> str:
        return cmmlu_answer(prediction)

    def gold(self, unit: Sample) -> str:
        return str(unit["target"])

    def groups(self, datasets: Sequence[str]) -> list[Group]:
        return [Group(name, tuple(PREFIX + s for s in subjects)) for name, subjects in cmmlu_data.GROUPS]

    def csv_groups(self) -> bool:
        return bool(self.settings.get("summary_groups"))
