"""A summary row over several datasets of a suite (mmlu's subject groups, bbh's average, cmmlu's groups)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Group:
    """A summary row over several datasets: OpenCompass's naive mean, or the micro (pooled) accuracy."""

    name: str
    subsets: tuple[str, ...]
    kind: Literal["naive", "micro"] = "naive"

    @property
    def metric(self) -> str:
        return "naive_average" if self.kind == "naive" else "weighted_average"
