"""MMLU's files as users have them, and OpenCompass's subject groups.

Layout (MMLU's data.tar): `DIR/test/<subject>_test.csv` (scored) and `DIR/dev/<subject>_dev.csv`
(the 5-shot pool: its first five rows), header-less CSV rows `question,A,B,C,D,answer` with the
answer one of A-D. `DIR` may also be the folder above `data/`. A subject's dataset name is
`lukaemon_mmlu_<subject>` (OpenCompass's abbr); sample ids are `<subject>/<row>`.

Groups (OpenCompass's summarizers/groups/mmlu.py): mmlu-humanities (13 subjects), mmlu-stem (19),
mmlu-social-science (12), mmlu-other (13) and mmlu (all 57), each the naive mean of subject
accuracies, and mmlu-weighted: OpenCompass weighs each subject by its full test size, which is the
micro accuracy of a full run; here it is the micro accuracy of the samples scored (the same on the
full test set, and still the micro accuracy under --sample).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.dataset import Sample, decode_utf8

PREFIX = "lukaemon_mmlu_"
LETTERS = ("A", "B", "C", "D")
SHOTS = 5

HUMANITIES = (
    "formal_logic", "high_school_european_history", "high_school_us_history", "high_school_world_history",
    "international_law", "jurisprudence", "logical_fallacies", "moral_disputes", "moral_scenarios", "philosophy",
    "prehistory", "professional_law", "world_religions")
STEM = (
    "abstract_algebra", "anatomy", "astronomy", "college_biology", "college_chemistry", "college_computer_science",
    "college_mathematics", "college_physics", "computer_security", "conceptual_physics", "electrical_engineering",
    "elementary_mathematics", "high_school_biology", "high_school_chemistry", "high_school_computer_science",
    "high_school_mathematics", "high_school_physics", "high_school_statistics", "machine_learning")
SOCIAL_SCIENCE = (
    "econometrics", "high_school_geography", "high_school_government_and_politics", "high_school_macroeconomics",
    "high_school_microeconomics", "high_school_psychology", "human_sexuality", "professional_psychology",
    "public_relations", "security_studies", "sociology", "us_foreign_policy")
OTHER = (
    "business_ethics", "clinical_knowledge", "college_medicine", "global_facts", "human_aging", "management",
    "marketing", "medical_genetics", "miscellaneous", "nutrition", "professional_accounting",
    "professional_medicine", "virology")
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("mmlu-humanities", HUMANITIES), ("mmlu-stem", STEM), ("mmlu-social-science", SOCIAL_SCIENCE),
    ("mmlu-other", OTHER), ("mmlu", HUMANITIES + STEM + SOCIAL_SCIENCE + OTHER))


def abbr(subject: str) -> str:
    return PREFIX + subject


def _root(path: Path) -> Path:
    if (path / "test").is_dir():
        return path
    if (path / "data" / "test").is_dir():
        return path / "data"
    raise ConfigError(f"{path}: expected MMLU's layout, {path}/test/<subject>_test.csv (and dev/<subject>_dev.csv "
                      "for 5-shot)")


def _rows(source: Path) -> list[tuple[int, list[str]]]:
    try:
        rows = list(csv.reader(io.StringIO(decode_utf8(source, source.read_bytes()), newline="")))
    except (OSError, csv.Error) as exc:
        raise ConfigError(f"{source}: cannot read: {exc}") from None
    out = []
    for number, row in enumerate(rows, start=1):
        if not row or not any(cell.strip() for cell in row):
            continue
        if len(row) != 6:
            raise ConfigError(f"{source}: row {number}: {len(row)} columns; MMLU rows are question,A,B,C,D,answer")
        answer = row[5].strip()
        if answer not in LETTERS:
            raise ConfigError(f"{source}: row {number}: answer {row[5]!r} is not one of A, B, C, D")
        out.append((number, [*row[:5], answer]))
    return out


def load_mmlu(path: Path) -> tuple[list[Sample], dict[str, list[list[str]]]]:
    """(test samples of every subject, subject -> its first five dev rows) from an MMLU directory."""
    if not path.is_dir():
        raise ConfigError(f"{path}: an MMLU dataset is a directory (test/<subject>_test.csv, dev/<subject>_dev.csv)")
    root = _root(path)
    files = sorted((root / "test").glob("*_test.csv"))
    if not files:
        raise ConfigError(f"{root / 'test'}: no <subject>_test.csv files")
    samples: list[Sample] = []
    dev: dict[str, list[list[str]]] = {}
    for source in files:
        subject = source.name.removesuffix("_test.csv")
        for index, (_, row) in enumerate(_rows(source)):
            samples.append({"id": f"{subject}/{index}", "subject": subject, "index": index, "input": row[0],
                            "A": row[1], "B": row[2], "C": row[3], "D": row[4], "target": row[5]})
        dev_file = root / "dev" / f"{subject}_dev.csv"
        if dev_file.is_file():
            dev[subject] = [row for _, row in _rows(dev_file)[:SHOTS]]
    return samples, dev
