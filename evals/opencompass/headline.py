"""The one number per model of an OpenCompass-scored run, as `ops posttrain` and the run's headline read it.

The headline row of a suite is its group of the same name (mmlu: the naive mean over subjects), else its
only dataset (gsm8k), else the naive mean over its datasets, each model's value with its 95 % interval
(Wald over the row's samples; for a naive mean, the mean of the datasets' variances over their count) and
each other model minus the first with the paired interval scoring.py computed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from orchestra_ops.evals.opencompass import paired
from orchestra_ops.evals.opencompass.scoring import ScoredSuite

from orchestra_ops.core.headline import Z95, Headline, ModelScore, ScoreDifference, proportion_half_width
from orchestra_ops.runner.dataset import Sample, sample_id
from orchestra_ops.runner.results import TaskId

COUNTERS = ("correct", "n", "failed", "missing")


def _metric_value(cell: Mapping[str, Any]) -> float | None:
    if "accuracy" in cell:
        value = cell["accuracy"]
        return None if value is None else float(value)
    for key, value in cell.items():
        if key not in COUNTERS and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def headline_row(name: str, member: ScoredSuite, scores: Mapping[str, Any],
                 records: Mapping[TaskId, dict[str, Any]], units: list[Sample]) -> dict[str, Any]:
    """The suite's one number per model and, for each other model, adapter - base with the weighted paired
    bootstrap interval over all its samples (paired.weighted_bootstrap)."""
    models: list[str] = list(scores.get("models") or [])
    groups, datasets = scores.get("groups") or {}, scores.get("datasets") or {}
    subsets: list[str] = list(datasets)
    weighting: paired.Weighting = "naive"
    if name in groups:
        group = next(g for g in member.groups(list(datasets)) if g.name == name)
        subsets, weighting = [d for d in group.subsets if d in datasets], group.kind
        result: dict[str, Any] = {"row": name, "metric": groups[name]["metric"], "scores": dict(groups[name]["scores"])}
    elif len(datasets) == 1:
        row = subsets[0]
        weighting = "micro"
        result = {"row": row, "metric": "accuracy", "scores": {m: _metric_value(datasets[row][m]) for m in models}}
    else:  # several datasets and no group of the suite's name: the naive mean over them
        values = {m: [_metric_value(datasets[d][m]) for d in datasets] for m in models}
        result = {"row": name, "metric": "naive_average",
                  "scores": {m: (None if not v or any(x is None for x in v) else sum(x or 0.0 for x in v) / len(v))
                             for m, v in values.items()}}
    outcomes: dict[tuple[str, str], dict[Any, bool]] = {}
    for unit in units:
        record = records.get(sample_id(unit))
        if record is not None and record.get("status") == "ok":
            key = (member.dataset_of(unit), str(unit["model"]))
            outcomes.setdefault(key, {})[unit["sample"]] = bool(record.get("correct"))
    result["comparisons"] = {}
    for other in models[1:]:
        per_subset = {}
        for d in subsets:
            base, mine = outcomes.get((d, models[0]), {}), outcomes.get((d, other), {})
            per_subset[d] = [(base[s], mine[s]) for s in base if s in mine]
        interval = paired.weighted_bootstrap(per_subset, weighting)
        result["comparisons"][other] = interval.to_json() if interval else None
    return result


def row_interval(row: str, model: str, scores: Mapping[str, Any]) -> tuple[float | None, int]:
    """(the 95 % half-width of `model`'s value on the headline row `row`, the samples it covers)."""
    datasets = scores.get("datasets") or {}
    if row in datasets:
        cell = datasets[row].get(model) or {}
        return proportion_half_width(int(cell.get("correct") or 0), int(cell.get("n") or 0)), int(cell.get("n") or 0)
    cells = [by_model.get(model) or {} for by_model in datasets.values()]
    if not cells or any(not c.get("n") for c in cells):
        return None, sum(int(c.get("n") or 0) for c in cells)
    group = (scores.get("groups") or {}).get(row) or {}
    total = sum(int(c["n"]) for c in cells)
    if group.get("metric") == "weighted_average":
        return proportion_half_width(sum(int(c.get("correct") or 0) for c in cells), total), total
    variance = sum((c["correct"] / c["n"]) * (1 - c["correct"] / c["n"]) / c["n"] for c in cells)
    return 100 * Z95 * math.sqrt(variance) / len(cells), total


def to_headline(row: Mapping[str, Any], scores: Mapping[str, Any], dataset: str | None = None) -> Headline:
    """A headline row (headline_row's dict) of one suite's scores as a Headline; `dataset` labels it in a
    run of several suites."""
    models: list[str] = list(scores.get("models") or [])
    out: list[ModelScore] = []
    for model in models:
        value = row["scores"].get(model)
        if value is not None:
            half, n = row_interval(row["row"], model, scores)
            out.append(ModelScore(model, float(value), half, n, dataset))
    differences = []
    for other, interval in (row.get("comparisons") or {}).items():
        if interval:
            low, high = interval.get("ci95") or (None, None)
            differences.append(ScoreDifference(other, models[0], float(interval["difference"]), low, high,
                                               int(interval.get("n") or 0), dataset))
    return Headline(metric=str(row.get("metric") or "accuracy"), scores=out, differences=differences)


def run_headline(rows: Mapping[str, Mapping[str, Any]], members: Mapping[str, Mapping[str, Any]]) -> Headline:
    """The headline of a run of several suites: each suite's headline row, labelled with its name."""
    parts = [to_headline(row, members.get(name) or {}, name) for name, row in rows.items()]
    metrics = sorted({part.metric for part in parts})
    return Headline(metric=" / ".join(metrics) or "accuracy", scores=[s for p in parts for s in p.scores],
                    differences=[d for p in parts for d in p.differences])
