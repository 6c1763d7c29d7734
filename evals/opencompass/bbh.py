"""The bbh suite: OpenCompass's bbh_gen (config bbh_gen_ee62e9) over the fleet, all 27 subsets.

Read from OpenCompass a5acc4bb: opencompass/configs/datasets/bbh/bbh_gen.py imports bbh_gen_ee62e9.py: per
subset one HUMAN turn, an instruction, the subset's chain-of-thought examples (lib_prompt/<subset>.txt), then
`Q: <input>` and `A: Let's think step by step.`; zero retriever, GenInferencer with the model's max_out_len.
The 17 multiple-choice subsets (bbh_multiple_choice_sets) use BBHEvaluator_mcq with bbh_mcq_postprocess on
the prediction and on the target (its dataset_postprocessor): exact match. The 10 free-form subsets
(bbh_free_form_sets) use BBHEvaluator, which applies bbh_freeform_postprocess to both sides and compares them
casefolded. Both report `score` (100 x correct / n); abbrs `bbh-<subset>`. opencompass/datasets/bbh.py
(BBHDataset: DIR/<subset>.json, {"examples": [{"input", "target"}…]}; the evaluators and postprocessors,
ported in postprocess.py). The `bbh` group (opencompass/configs/summarizers/groups/bbh.py): the naive mean
of the 27 subset scores, OpenCompass's reported BBH average.

Prompt: the `question` template (a data file) with `{hint}` the subset's examples read from `--hints DIR`
(DIR/<subset>.txt: OpenCompass's lib_prompt layout, so its folder can be given; the default is our own
synthetic examples). Each subset's summary-CSV version is the hash of the template and its own examples,
as OpenCompass's per-dataset versions differ by their prompts. Sample ids are `<subset>/<row>`.
`--summary-groups` writes the `bbh` row (naive_average) into summary/summary.csv.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestra_ops.evals.bundled import packaged
from orchestra_ops.evals.opencompass.groups import Group
from orchestra_ops.evals.opencompass.postprocess import bbh_freeform, bbh_mcq
from orchestra_ops.evals.opencompass.sampling import seeded_sample
from orchestra_ops.evals.opencompass.suite import OpenCompassSuite, common_options

from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.dataset import Sample
from orchestra_ops.runner.suite import SuiteOption, TaskContext

MULTIPLE_CHOICE = (
    "temporal_sequences", "disambiguation_qa", "date_understanding", "tracking_shuffled_objects_three_objects",
    "penguins_in_a_table", "geometric_shapes", "snarks", "ruin_names", "tracking_shuffled_objects_seven_objects",
    "tracking_shuffled_objects_five_objects", "logical_deduction_three_objects", "hyperbaton",
    "logical_deduction_five_objects", "logical_deduction_seven_objects", "movie_recommendation",
    "salient_translation_error_detection", "reasoning_about_colored_objects")
FREE_FORM = (
    "multistep_arithmetic_two", "navigate", "dyck_languages", "word_sorting", "sports_understanding",
    "boolean_expressions", "object_counting", "formal_fallacies", "causal_judgement", "web_of_lies")
SUBSETS = MULTIPLE_CHOICE + FREE_FORM  # OpenCompass's config order
PREFIX = "bbh-"


class BbhSuite(OpenCompassSuite):
    """bbh as OpenCompass's bbh_gen scores it: CoT few-shot per subset, its two postprocessors, the mean."""

    name = "bbh"
    default_dataset = packaged("opencompass/data/bbh")
    metric = "score"
    template_files: Mapping[str, str] = {"question": packaged("opencompass/templates/bbh_question.txt")}
    template_fields: Mapping[str, tuple[str, ...]] = {"question": ("hint", "input")}
    options = (
        SuiteOption("hints", "--hints", "path", "Folder of each subset's few-shot examples, <subset>.txt "
                    "(OpenCompass's bbh/lib_prompt layout).", default=packaged("opencompass/templates/bbh_hints")),
        SuiteOption("subsets", "--subset", "str", "Only this subset (repeat for several).", multiple=True),
        SuiteOption("summary_groups", "--summary-groups", "flag", "Also write the bbh row (naive average of the "
                    "27 subsets) into summary/summary.csv.", default=False),
        *common_options(4096),
    )

    def __init__(self) -> None:
        super().__init__()
        self.hints: dict[str, str] = {}

    def check(self, options: Mapping[str, Any]) -> None:
        folder = Path(str(options.get("hints") or packaged("opencompass/templates/bbh_hints")))
        if not folder.is_dir():
            raise ConfigError(f"--hints {folder}: no such directory (it holds <subset>.txt for each BBH subset)")
        wanted = list(options.get("subsets") or ()) or list(SUBSETS)
        hints = {}
        for subset in wanted:
            source = folder / f"{subset}.txt"
            try:
                hints[subset] = source.read_text(encoding="utf-8")
            except FileNotFoundError:
                raise ConfigError(f"--hints: {source}: no such file (the few-shot examples of {subset})") from None
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"--hints: {source}: cannot read: {exc}") from None
        self.hints = hints

    def load(self, path: Path, *, dedupe: bool) -> list[Sample]:
        if not path.is_dir():
            raise ConfigError(f"{path}: a BBH dataset is a directory of <subset>.json files")
        files = {p.stem: p for p in path.glob("*.json") if p.stem in SUBSETS}
        if not files:
            raise ConfigError(f"{path}: no <subset>.json of a BBH subset ({SUBSETS[0]}.json, …)")
        samples: list[Sample] = []
        for subset in SUBSETS:
            if subset not in files:
                continue
            source = files[subset]
            try:
                examples = json.loads(source.read_text(encoding="utf-8"))["examples"]
            except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ConfigError(f"{source}: not a BBH file ({{\"examples\": [{{\"input\", \"target\"}}…]}}): "
                                  f"{exc}") from None
            for index, example in enumerate(examples):
                if not isinstance(example, dict) or not isinstance(example.get("input"), str) \
                        or not isinstance(example.get("target"), str):
                    raise ConfigError(f"{source}: examples[{index}]: an example is {{\"input\": …, \"target\": …}}")
                samples.append({"id": f"{subset}/{index}", "subset": subset, "index": index,
                                "input": example["input"], "target": example["target"]})
        return samples

    def select(self, samples: list[Sample], options: Mapping[str, Any]) -> list[Sample]:
        present = {s["subset"] for s in samples}
        wanted = list(options.get("subsets") or ()) or [s for s in SUBSETS if s in present]
        unknown = [s for s in wanted if s not in present]
        if unknown:
            raise ConfigError(f"--subset {unknown[0]}: not in the dataset (subsets: "
                              f"{', '.join(s for s in SUBSETS if s in present)})")
        seed, count = int(options.get("seed") or 0), options.get("sample")
        return [s for subset in SUBSETS if subset in wanted
                for s in seeded_sample([s for s in samples if s["subset"] == subset], count, seed, subset)]

    def dataset_of(self, unit: Sample) -> str:
        return PREFIX + str(unit["subset"])

    def messages(self, unit: Sample) -> list[dict[str, str]]:
        hint = self.hints[unit["subset"]]
        return [{"role": "user", "content": self.templates["question"].render(hint=hint, input=str(unit["input"]))}]

    def extract(self, unit: Sample, prediction: str) -> str:
        return bbh_mcq(prediction) if unit["subset"] in MULTIPLE_CHOICE else bbh_freeform(prediction)

    def gold(self, unit: Sample) -> str:
        target = str(unit["target"])
        return bbh_mcq(target) if unit["subset"] in MULTIPLE_CHOICE else bbh_freeform(target)

    def raw_gold(self, unit: Sample) -> str:
        return str(unit["target"])

    async def evaluate(self, unit: Sample, extracted: str, gold: str, ctx: TaskContext) -> dict[str, Any]:
        if unit["subset"] in MULTIPLE_CHOICE:
            return {"correct": extracted == gold}
        return {"correct": extracted.casefold() == gold.casefold()}

    def version_templates(self) -> list[str]:
        return ["question"]

    def dataset_version(self, dataset: str) -> str:
        hint = self.hints.get(dataset.removeprefix(PREFIX), "")
        parts = [self.templates["question"].sha256, hashlib.sha256(hint.encode()).hexdigest()]
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:6]

    def groups(self, datasets: Sequence[str]) -> list[Group]:
        return [Group("bbh", tuple(PREFIX + s for s in SUBSETS))]

    def csv_groups(self) -> bool:
        return bool(self.settings.get("summary_groups"))
