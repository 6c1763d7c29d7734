"""The score of each task, the same way for `ops analyze` and `ops compare`.

A run's metric is `accuracy` when its records carry a boolean `correct`, `score` when they carry a
number `score`, else `success` (the share of tasks that finished without error). A task whose
grader failed (`error_type: grader_error`, or `grader_error: true`) is left out of the score and
counted; any other errored task counts as 0, as the users' scripts counted `status=error` as
`correct=False`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from orchestra_ops.runner.results import TaskId

Metric = Literal["accuracy", "score", "success"]
BINARY_METRICS: frozenset[str] = frozenset({"accuracy", "success"})


@dataclass
class TaskScores:
    metric: Metric
    values: dict[TaskId, float]  # id -> score, graded tasks only
    ungraded: list[TaskId]  # grader errors, left out

    @property
    def mean(self) -> float | None:
        return sum(self.values.values()) / len(self.values) if self.values else None

    def to_json(self) -> dict[str, Any]:
        return {"metric": self.metric, "value": self.mean, "graded": len(self.values),
                "ungraded": len(self.ungraded)}


def run_metric(final: Mapping[TaskId, Mapping[str, Any]]) -> Metric:
    if any(isinstance(r.get("correct"), bool) for r in final.values()):
        return "accuracy"
    if any(_number(r.get("score")) is not None for r in final.values()):
        return "score"
    return "success"


def task_scores(final: Mapping[TaskId, Mapping[str, Any]], metric: Metric | None = None) -> TaskScores:
    chosen: Metric = metric or run_metric(final)
    values: dict[TaskId, float] = {}
    ungraded: list[TaskId] = []
    for task_id, record in final.items():
        value = _value(record, chosen)
        if value is None:
            ungraded.append(task_id)
        else:
            values[task_id] = value
    return TaskScores(chosen, values, ungraded)


def _value(record: Mapping[str, Any], metric: Metric) -> float | None:
    if metric == "success":
        return 1.0 if record.get("status") == "ok" else 0.0
    if record.get("error_type") == "grader_error" or record.get("grader_error") is True:
        return None
    if metric == "accuracy":
        correct = record.get("correct")
        return float(correct) if isinstance(correct, bool) else 0.0
    score = _number(record.get("score"))
    return 0.0 if score is None else score


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None
