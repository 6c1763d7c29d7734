"""OpenCompass's output files, so scripts that read an OpenCompass work dir read a run dir unchanged.

    predictions/<model>/<dataset>.json   {"0": {"origin_prompt": [{"role": "HUMAN"|"BOT"|"SYSTEM", "prompt"}…],
                                                "prediction": raw text, "gold": raw reference}, "1": …}
    results/<model>/<dataset>.json       {"accuracy": 71.34, "details": {"0": {"prompt", "origin_prediction",
                                          "predictions": extracted, "references": gold, "correct"}, …},
                                          "type": "GEN"}
    summary/summary.csv, summary.md      dataset,version,metric,mode,<model>… ; scores with two
                                          decimals, `-` where a model has no score; commas in a cell
                                          become spaces (as DefaultSummarizer writes them)

Keys "0", "1", … follow the dataset's row order among the rows scored. A model or dataset name
with `/` becomes `_` in a folder or file name (the CSV column keeps the name).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestra_ops.core.fsutil import atomic_write_text

ROLE_NAMES = {"user": "HUMAN", "assistant": "BOT", "system": "SYSTEM"}
SUMMARY_HEADER = ("dataset", "version", "metric", "mode")


@dataclass(frozen=True)
class SummaryRow:
    dataset: str
    version: str
    metric: str
    mode: str
    scores: Mapping[str, float | None]  # model -> score, None: no score


def file_name(name: str) -> str:
    return name.replace("/", "_")


def origin_prompt(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Chat messages as OpenCompass records an API model's prompt (its role names)."""
    return [{"role": ROLE_NAMES.get(str(m.get("role")), str(m.get("role")).upper()),
             "prompt": str(m.get("content") or "")} for m in messages]


def write_json(path: Path, data: Any) -> None:
    """Compact JSON (OpenCompass indents its files; an indent makes json use its pure-Python encoder,
    ten times slower on a 14,000-row mmlu run, and no reader depends on it)."""
    atomic_write_text(path, json.dumps(data, ensure_ascii=False) + "\n")


def write_predictions(run_dir: Path, model: str, dataset: str, rows: Sequence[Mapping[str, Any]]) -> Path:
    """rows: {"origin_prompt", "prediction", "gold"} in dataset order; an empty gold is left out."""
    body = {}
    for position, row in enumerate(rows):
        item: dict[str, Any] = {"origin_prompt": row["origin_prompt"], "prediction": row["prediction"]}
        if row.get("gold"):
            item["gold"] = row["gold"]
        body[str(position)] = item
    path = run_dir / "predictions" / file_name(model) / f"{file_name(dataset)}.json"
    write_json(path, body)
    return path


def write_results(run_dir: Path, model: str, dataset: str, accuracy: float,
                  details: Sequence[Mapping[str, Any]], metric: str = "accuracy") -> Path:
    """details: {"prompt", "origin_prediction", "predictions", "references", "correct"} in dataset order;
    the score under `metric` (accuracy, bbh's score, humaneval_pass@1)."""
    body = {metric: accuracy, "details": {str(i): dict(d) for i, d in enumerate(details)}, "type": "GEN"}
    path = run_dir / "results" / file_name(model) / f"{file_name(dataset)}.json"
    write_json(path, body)
    return path


def summary_table(models: Sequence[str], rows: Sequence[SummaryRow]) -> list[list[str]]:
    table = [[*SUMMARY_HEADER, *models]]
    for row in rows:
        cells = [row.dataset, row.version, row.metric, row.mode]
        cells += ["-" if row.scores.get(m) is None else f"{row.scores[m]:.02f}" for m in models]
        table.append(cells)
    return table


def write_summary(run_dir: Path, models: Sequence[str], rows: Sequence[SummaryRow]) -> Path:
    """summary/summary.csv (and .md with the same table); returns the CSV's path."""
    table = summary_table(models, rows)
    csv = "\n".join(",".join(cell.replace(",", " ") for cell in line) for line in table) + "\n"
    markdown = ["| " + " | ".join(table[0]) + " |", "|" + "|".join("-----" for _ in table[0]) + "|"]
    markdown += ["| " + " | ".join(line) + " |" for line in table[1:]]
    path = run_dir / "summary" / "summary.csv"
    atomic_write_text(path, csv)
    atomic_write_text(run_dir / "summary" / "summary.md", "\n".join(markdown) + "\n")
    return path
