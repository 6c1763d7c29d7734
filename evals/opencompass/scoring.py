"""scores.json, the OpenCompass-shaped files and the side-by-side table, from the units' final records."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from orchestra_ops.evals.opencompass import outputs, paired
from orchestra_ops.evals.opencompass.groups import Group

from orchestra_ops.runner.dataset import Sample, sample_id
from orchestra_ops.runner.results import TaskId
from orchestra_ops.runner.suite import unit_counts


class ScoredSuite(Protocol):
    """What scoring reads of an OpenCompass suite (suite.py's OpenCompassSuite and its members)."""

    name: str
    metric: str
    mode: str
    models: Sequence[str]
    run_dir: Path | None

    def dataset_of(self, unit: Sample) -> str: ...
    def messages(self, unit: Sample) -> list[dict[str, str]]: ...
    def version(self) -> str: ...
    def variant(self) -> str: ...
    def groups(self, datasets: Sequence[str]) -> list[Group]: ...
    def raw_gold(self, unit: Sample) -> str: ...
    def detail_fields(self, record: Mapping[str, Any]) -> dict[str, Any]: ...
    def dataset_version(self, dataset: str) -> str: ...
    def csv_groups(self) -> bool: ...


@dataclass
class Cell:
    """One model on one dataset."""

    n: int = 0
    correct: int = 0
    failed: int = 0
    missing: int = 0
    outcomes: dict[TaskId, bool] = field(default_factory=dict)  # sample -> correct, for units that finished ok
    rows: list[tuple[Sample, dict[str, Any]]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.n > 0 and self.failed == 0 and self.missing == 0

    @property
    def accuracy(self) -> float | None:
        return 100.0 * self.correct / self.n if self.complete else None

    def to_json(self) -> dict[str, Any]:
        return {"accuracy": self.accuracy, "correct": self.correct, "n": self.n, "failed": self.failed,
                "missing": self.missing}


def _cells(suite: ScoredSuite, records: Mapping[TaskId, dict[str, Any]],
           units: list[Sample]) -> tuple[list[str], list[str], dict[tuple[str, str], Cell]]:
    datasets: list[str] = []
    models: list[str] = [m for m in suite.models if any(u["model"] == m for u in units)]
    cells: dict[tuple[str, str], Cell] = {}
    for unit in units:
        dataset, model = suite.dataset_of(unit), str(unit["model"])
        if dataset not in datasets:
            datasets.append(dataset)
        if model not in models:
            models.append(model)
        cell = cells.setdefault((dataset, model), Cell())
        cell.n += 1
        record = records.get(sample_id(unit))
        if record is None:
            cell.missing += 1
        elif record.get("status") != "ok":
            cell.failed += 1
        else:
            right = bool(record.get("correct"))
            cell.correct += right
            cell.outcomes[unit["sample"]] = right
            cell.rows.append((unit, record))
    return datasets, models, cells


def _pairs(base: Cell, other: Cell) -> list[paired.Pair]:
    return [(base.outcomes[s], other.outcomes[s]) for s in base.outcomes if s in other.outcomes]


def _group_value(group: Group, subsets: list[str], model: str, cells: Mapping[tuple[str, str], Cell]) -> float | None:
    parts = [cells.get((d, model), Cell()) for d in subsets]
    if not parts or not all(c.complete for c in parts):
        return None
    if group.kind == "naive":
        return sum(c.accuracy or 0.0 for c in parts) / len(parts)
    return 100.0 * sum(c.correct for c in parts) / sum(c.n for c in parts)


def _group_interval(group: Group, subsets: list[str], base: str, other: str,
                    cells: Mapping[tuple[str, str], Cell]) -> paired.Interval | None:
    per_subset = [_pairs(cells.get((d, base), Cell()), cells.get((d, other), Cell())) for d in subsets]
    if group.kind == "naive":
        return paired.naive_mean(per_subset)
    return paired.paired([p for pairs in per_subset for p in pairs])


def score_run(suite: ScoredSuite, records: Mapping[TaskId, dict[str, Any]],
              units: list[Sample]) -> dict[str, Any]:
    datasets, models, cells = _cells(suite, records, units)
    version = suite.version()
    groups = [(g, [d for d in g.subsets if d in datasets]) for g in suite.groups(datasets)]
    groups = [(g, subsets) for g, subsets in groups if subsets]
    scores: dict[str, Any] = {
        "suite": suite.name, "variant": suite.variant() or None, "version": version, "metric": suite.metric,
        "models": models,
        "baseline": models[0] if models else None, "counts": unit_counts(records, units),
        "datasets": {d: {m: cells.get((d, m), Cell()).to_json() for m in models} for d in datasets},
        "groups": {g.name: {"metric": g.metric, "datasets": len(subsets), "of": len(g.subsets),
                            "scores": {m: _group_value(g, subsets, m, cells) for m in models}}
                   for g, subsets in groups},
        "comparisons": {},
    }
    for other in models[1:]:
        rows: dict[str, Any] = {}
        for d in datasets:
            interval = paired.paired(_pairs(cells.get((d, models[0]), Cell()), cells.get((d, other), Cell())))
            rows[d] = interval.to_json() if interval else None
        for g, subsets in groups:
            interval = _group_interval(g, subsets, models[0], other, cells)
            rows[g.name] = interval.to_json() if interval else None
        scores["comparisons"][other] = rows
    if suite.run_dir is not None:
        scores["outputs"] = _write_outputs(suite, datasets, models, cells, groups, version)
    return scores


def _write_outputs(suite: ScoredSuite, datasets: list[str], models: list[str],
                   cells: Mapping[tuple[str, str], Cell], groups: list[tuple[Group, list[str]]],
                   version: str) -> dict[str, str]:
    assert suite.run_dir is not None
    for (dataset, model), cell in cells.items():
        if not cell.complete or cell.accuracy is None:
            continue
        predictions, details = [], []
        for unit, record in cell.rows:
            prompt = outputs.origin_prompt(suite.messages(unit))
            predictions.append({"origin_prompt": prompt, "prediction": record.get("prediction", ""),
                                "gold": suite.raw_gold(unit)})
            details.append({"prompt": prompt, "origin_prediction": record.get("prediction", ""),
                            "predictions": record.get("extracted", ""), "references": record.get("gold", ""),
                            "correct": bool(record.get("correct")), **suite.detail_fields(record)})
        outputs.write_predictions(suite.run_dir, model, dataset, predictions)
        outputs.write_results(suite.run_dir, model, dataset, cell.accuracy, details, metric=suite.metric)
    rows = []
    for dataset in datasets:
        values = {m: cells.get((dataset, m), Cell()).accuracy for m in models}
        if all(v is None for v in values.values()):
            rows.append(outputs.SummaryRow(dataset, "-", "-", "-", {}))
        else:
            rows.append(outputs.SummaryRow(dataset, suite.dataset_version(dataset), suite.metric, suite.mode, values))
    if suite.csv_groups():
        for group, subsets in groups:
            if len(subsets) == len(group.subsets):  # OpenCompass has no row for a group missing a subset
                values = {m: _group_value(group, subsets, m, cells) for m in models}
                rows.append(outputs.SummaryRow(group.name, "-", group.metric, suite.mode, values))
    csv = outputs.write_summary(suite.run_dir, models, rows)
    return {"summary": str(csv), "predictions": str(suite.run_dir / "predictions"),
            "results": str(suite.run_dir / "results")}


# ---- the table ------------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _diff(interval: Mapping[str, Any] | None) -> tuple[str, str]:
    if not interval:
        return "-", "-"
    ci = interval.get("ci95")
    span = "-" if not ci else f"[{ci[0]:+.2f}, {ci[1]:+.2f}]"
    return f"{interval['difference']:+.2f}", span


def table_lines(scores: Mapping[str, Any]) -> list[str]:
    """Accuracy per dataset (and group) for every model side by side; each other model minus the first
    with its paired 95 % interval; then what is incomplete."""
    models: list[str] = list(scores["models"])
    if not models:
        return ["no units to score"]
    header = ["dataset", *models]
    for other in models[1:]:
        header += [f"{other} - {models[0]}", "95% CI"]
    rows: list[list[str]] = []
    for name, by_model in scores["datasets"].items():
        rows.append(_row(name, [by_model[m]["accuracy"] for m in models], scores, name, models))
    for name, group in scores["groups"].items():
        label = f"{name} ({group['metric']}, {group['datasets']}/{group['of']})"
        rows.append(_row(label, [group["scores"][m] for m in models], scores, name, models))
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [f"{scores['suite']} (version {scores['version']}{', ' + scores['variant'] if scores['variant'] else ''})"
             f": accuracy in %; each model minus {models[0]} on the samples both answered"]
    for row in [header, *rows]:
        lines.append("  " + "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                                      for i, (cell, w) in enumerate(zip(row, widths, strict=True))))
    lines += _incomplete(scores, models)
    if scores.get("outputs"):
        lines.append(f"OpenCompass-shaped summary: {scores['outputs']['summary']}")
    return lines


def _row(label: str, values: Sequence[float | None], scores: Mapping[str, Any], key: str,
         models: list[str]) -> list[str]:
    row = [label, *(_pct(v) for v in values)]
    for other in models[1:]:
        row += list(_diff(scores["comparisons"].get(other, {}).get(key)))
    return row


def _incomplete(scores: Mapping[str, Any], models: list[str]) -> list[str]:
    lines = []
    for model in models:
        failed = sum(by[model]["failed"] for by in scores["datasets"].values())
        missing = sum(by[model]["missing"] for by in scores["datasets"].values())
        if failed or missing:
            lines.append(f"{model}: {failed} unit(s) failed, {missing} without a result: its scores show '-' "
                         "until they finish (--retry-failed / --resume)")
    return lines
