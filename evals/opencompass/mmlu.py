"""The mmlu suite: OpenCompass's mmlu_gen over the fleet, in either of its two defaults.

`--variant 0shot` (default; mmlu_openai_simple_evals_gen_b618ea, OpenCompass's mmlu_gen since 0.4.2):
one user turn, the `zero_shot` template (an instruction to end with `ANSWER: $LETTER`, the question,
then `A) …` to `D) …`), stripped as OpenCompass strips it; the first `ANSWER: X` anywhere is the answer.
`--variant 5shot` (mmlu_gen_4d595a, the default up to 0.4.1): the first five dev rows of the
subject as user/assistant turns (`five_shot` template with the `five_shot_hint` per subject; the
assistant turn is the letter and a newline), then the question; the answer is read with
first_option_postprocess (extract.py). Both templates are data files (`--template NAME=PATH`).

Scores: accuracy per subject (`lukaemon_mmlu_<subject>`), the group means and the micro accuracy
(mmlu_data.py); `--summary-groups` also writes the group rows into summary/summary.csv, as
OpenCompass does with its mmlu summary groups (without them, as its default summarizer, the CSV has
the subject rows only).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from orchestra_ops.evals.bundled import packaged
from orchestra_ops.evals.opencompass import mmlu_data
from orchestra_ops.evals.opencompass.extract import mmlu_extract, mmlu_extract_five_shot
from orchestra_ops.evals.opencompass.groups import Group
from orchestra_ops.evals.opencompass.sampling import by_subject, sample_subjects
from orchestra_ops.evals.opencompass.suite import OpenCompassSuite, common_options

from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.dataset import Sample
from orchestra_ops.runner.suite import SuiteOption

ZERO_SHOT = "0shot"
FIVE_SHOT = "5shot"
OPTION_FIELDS = ("input", "A", "B", "C", "D")


class MmluSuite(OpenCompassSuite):
    """mmlu as OpenCompass's mmlu_gen scores it: per subject, group means and the micro accuracy."""

    name = "mmlu"
    default_dataset = packaged("opencompass/data/mmlu")
    template_files: Mapping[str, str] = {"zero_shot": packaged("opencompass/templates/mmlu_0shot.txt"),
                      "five_shot": packaged("opencompass/templates/mmlu_5shot.txt"),
                      "five_shot_hint": packaged("opencompass/templates/mmlu_5shot_hint.txt")}
    template_fields: Mapping[str, tuple[str, ...]] = {"zero_shot": OPTION_FIELDS, "five_shot": ("hint", *OPTION_FIELDS),
                       "five_shot_hint": ("subject",)}
    options = (
        SuiteOption("variant", "--variant", "choice", "0shot: OpenCompass's current mmlu_gen (b618ea, ANSWER: LETTER); "
                    "5shot: the older one (4d595a, five dev shots).", default=ZERO_SHOT,
                    choices=(ZERO_SHOT, FIVE_SHOT)),
        SuiteOption("subjects", "--subject", "str", "Only this subject (repeat for several).", multiple=True),
        SuiteOption("summary_groups", "--summary-groups", "flag", "Also write the mmlu group rows into "
                    "summary/summary.csv (OpenCompass's mmlu summary groups).", default=False),
        *common_options(4096),
    )

    def __init__(self) -> None:
        super().__init__()
        self.dev: dict[str, list[list[str]]] = {}

    def check(self, options: Mapping[str, Any]) -> None:
        zero = self.templates["zero_shot"]
        self.templates["zero_shot"] = replace(zero, text=zero.text.strip())

    def variant(self) -> str:
        return str(self.settings.get("variant") or ZERO_SHOT)

    def load(self, path: Path, *, dedupe: bool) -> list[Sample]:
        samples, self.dev = mmlu_data.load_mmlu(path)
        return samples

    def select(self, samples: list[Sample], options: Mapping[str, Any]) -> list[Sample]:
        grouped, wanted = by_subject(samples, options)
        if (options.get("variant") or self.variant()) == FIVE_SHOT:
            short = [s for s in wanted if len(self.dev.get(s, [])) < mmlu_data.SHOTS]
            if short:
                raise ConfigError(f"--variant 5shot needs {mmlu_data.SHOTS} rows in dev/<subject>_dev.csv; "
                                  f"too few for: {', '.join(short)}")
        return sample_subjects(grouped, wanted, options)

    def dataset_of(self, unit: Sample) -> str:
        return mmlu_data.abbr(unit["subject"])

    def messages(self, unit: Sample) -> list[dict[str, str]]:
        if self.variant() == ZERO_SHOT:
            return [{"role": "user", "content": self.templates["zero_shot"].render(**_fields(unit))}]
        hint = self.templates["five_shot_hint"].render(subject=str(unit["subject"]).replace("_", " "))
        turn = self.templates["five_shot"]
        turns: list[dict[str, str]] = []
        for row in self.dev[unit["subject"]][: mmlu_data.SHOTS]:
            shot = dict(zip(OPTION_FIELDS, row[:5], strict=True))
            turns.append({"role": "user", "content": turn.render(hint=hint, **shot)})
            turns.append({"role": "assistant", "content": f"{row[5]}\n"})
        turns.append({"role": "user", "content": turn.render(hint=hint, **_fields(unit))})
        return turns

    def extract(self, unit: Sample, prediction: str) -> str:
        return mmlu_extract(prediction) if self.variant() == ZERO_SHOT else mmlu_extract_five_shot(prediction)

    def gold(self, unit: Sample) -> str:
        return str(unit["target"])

    def version_templates(self) -> list[str]:
        return ["zero_shot"] if self.variant() == ZERO_SHOT else ["five_shot", "five_shot_hint"]

    def groups(self, datasets: Sequence[str]) -> list[Group]:
        groups = [Group(name, tuple(mmlu_data.abbr(s) for s in subjects)) for name, subjects in mmlu_data.GROUPS]
        everything = tuple(mmlu_data.abbr(s) for s in mmlu_data.GROUPS[-1][1])
        return [*groups, Group("mmlu-weighted", everything, "micro")]

    def csv_groups(self) -> bool:
        return bool(self.settings.get("summary_groups"))


def _fields(unit: Sample) -> dict[str, str]:
    return {name: str(unit[name]) for name in OPTION_FIELDS}
