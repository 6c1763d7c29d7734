"""The hellaswag suite: OpenCompass's hellaswag_gen (config hellaswag_10shot_gen_e42710) over the fleet.

Read from OpenCompass a5acc4bb: opencompass/configs/datasets/hellaswag/hellaswag_gen.py imports
hellaswag_10shot_gen_e42710.py: a HUMAN instruction turn first, then the first ten rows of the train split
(FixKRetriever, fix_id_list 0-9) each as a HUMAN turn (the context, `A) …` to `D) …`, a closing question)
and a BOT turn (the gold letter and a newline), then the test row's HUMAN turn; GenInferencer with the
model's max_out_len; AccwithDetailsEvaluator; pred_postprocessor first_option_postprocess with options ABCD;
abbr `hellaswag`. opencompass/datasets/hellaswag.py (HellaswagDatasetwithICE): DIR/hellaswag_train_sampled25.jsonl
(the shots) and DIR/hellaswag.jsonl (scored), lines {"query", "choices": [4 endings], "gold": 0-3}; the
context is the query after its first `: ` (the activity label goes), the label "ABCD"[gold].

The instruction and the item are templates (data files: `--template instruction=PATH`, `item=PATH`).
Sample ids are `hellaswag/<row>`. Scored with first_option (postprocess.py), exact match; metric `accuracy`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from orchestra_ops.evals.bundled import packaged
from orchestra_ops.evals.opencompass.postprocess import first_option
from orchestra_ops.evals.opencompass.suite import SingleDatasetSuite, common_options

from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.dataset import Sample, read_jsonl

DATASET = "hellaswag"
TRAIN, VAL = "hellaswag_train_sampled25.jsonl", "hellaswag.jsonl"
SHOTS = 10
FIELDS = ("ctx", "A", "B", "C", "D")


def load_rows(source: Path) -> list[Sample]:
    rows: list[Sample] = []
    for number, row in read_jsonl(source, "hellaswag"):
        if not isinstance(row, dict) or not isinstance(row.get("query"), str) \
                or not isinstance(row.get("choices"), list) or len(row["choices"]) != 4 \
                or not all(isinstance(c, str) for c in row["choices"]) \
                or row.get("gold") not in (0, 1, 2, 3) or isinstance(row.get("gold"), bool):
            raise ConfigError(f"{source}:{number}: a hellaswag line is {{\"query\": …, \"choices\": [4 endings], "
                              "\"gold\": 0-3}")
        index = len(rows)
        rows.append({"id": f"{DATASET}/{index}", "index": index, "ctx": row["query"].split(": ", 1)[-1],
                     **dict(zip("ABCD", row["choices"], strict=True)), "target": "ABCD"[row["gold"]]})
    return rows


class HellaswagSuite(SingleDatasetSuite):
    """hellaswag as OpenCompass's hellaswag_gen scores it: ten fixed shots, the first option letter found."""

    dataset_name = DATASET

    name = "hellaswag"
    default_dataset = packaged("opencompass/data/hellaswag")
    template_files: Mapping[str, str] = {"instruction": packaged("opencompass/templates/hellaswag_instruction.txt"),
                                         "item": packaged("opencompass/templates/hellaswag_item.txt")}
    template_fields: Mapping[str, tuple[str, ...]] = {"item": FIELDS}
    options = common_options(4096)

    def __init__(self) -> None:
        super().__init__()
        self.shots: list[Sample] = []

    def load(self, path: Path, *, dedupe: bool) -> list[Sample]:
        if not path.is_dir():
            raise ConfigError(f"{path}: a hellaswag dataset is a directory holding {VAL} and {TRAIN}")
        for name in (VAL, TRAIN):
            if not (path / name).is_file():
                raise ConfigError(f"{path / name}: no such file (hellaswag_10shot_gen reads {VAL} and {TRAIN})")
        self.shots = load_rows(path / TRAIN)[:SHOTS]
        if len(self.shots) < SHOTS:
            raise ConfigError(f"{path / TRAIN}: {len(self.shots)} rows; the 10-shot prompt needs {SHOTS}")
        samples = load_rows(path / VAL)
        if not samples:
            raise ConfigError(f"{path / VAL}: no samples")
        return samples

    def messages(self, unit: Sample) -> list[dict[str, str]]:
        item = self.templates["item"]
        turns = [{"role": "user", "content": self.templates["instruction"].text}]
        for shot in self.shots:
            turns.append({"role": "user", "content": item.render(**{f: str(shot[f]) for f in FIELDS})})
            turns.append({"role": "assistant", "content": f"{shot['target']}\n"})
        turns.append({"role": "user", "content": item.render(**{f: str(unit[f]) for f in FIELDS})})
        return turns

    def extract(self, unit: Sample, prediction: str) -> str:
        return first_option(prediction)

    def gold(self, unit: Sample) -> str:
        return str(unit["target"])
