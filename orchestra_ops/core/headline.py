"""A run's headline: the score of each model with its 95 % interval, the difference when several ran, in one
format everywhere (the end of `ops eval`, `ops runs`, `ops eval-status`, the report).

Scores are percentages with one decimal; the interval is `± half-width` for one model's score (Wald for a
proportion, as HLE's judge script reports it; 1.96 standard errors of a mean or a bootstrap) and
`[low, high]` for a paired difference (the suites' paired intervals). A suite builds its Headline from
its scores (`Suite.headline`); it is stored in scores.json under `headline_scores`, so readers need no suite.
Never a number pooled across models.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

HEADLINE_KEY = "headline_scores"  # where scores.json keeps it
Z95 = 1.96


@dataclass(frozen=True)
class ModelScore:
    model: str
    score: float  # percent
    half_width: float | None  # percent points: the 95 % interval is score ± half_width (None: none known)
    n: int
    dataset: str | None = None  # several datasets in one run (ops eval opencompass): which one


@dataclass(frozen=True)
class ScoreDifference:
    model: str
    baseline: str
    difference: float  # percent points, model − baseline
    low: float | None  # the paired 95 % interval (None: too few pairs)
    high: float | None
    n: int
    dataset: str | None = None


@dataclass(frozen=True)
class Headline:
    metric: str  # what the score is (accuracy, average reward, HealthBench score, …)
    scores: list[ModelScore] = field(default_factory=list)
    differences: list[ScoreDifference] = field(default_factory=list)
    note: str = ""  # what a suite that grades nothing says instead (chat: "3 of 3 answered")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Headline:
        return cls(metric=str(data.get("metric", "")), note=str(data.get("note", "")),
                   scores=[ModelScore(**s) for s in data.get("scores") or []],
                   differences=[ScoreDifference(**d) for d in data.get("differences") or []])

    def rows(self) -> list[tuple[str, str]]:
        """(who, value) for each score (`answer`, `70.0% ± 20.1`) and difference (`ft − answer`,
        `+2.5 [−8.3, +13.3]`), in order."""
        rows = [(_label(s.model, s.dataset), format_score(s.score, s.half_width)) for s in self.scores]
        rows += [(_label(f"{d.model} − {d.baseline}", d.dataset), format_difference(d.difference, d.low, d.high))
                 for d in self.differences]
        return rows

    def parts(self) -> list[str]:
        """Each score (`answer 70.0% ± 20.1`) and difference (`ft − answer +2.5 [−8.3, +13.3]`), in order."""
        return [f"{who} {value}" for who, value in self.rows()]

    def text(self) -> str:
        """One line: `accuracy: answer 70.0% ± 20.1 (n=20), judge 50.0% ± 21.9 (n=20); judge − answer …`."""
        if not self.scores:
            return self.note or "no score"
        scores = ", ".join(f"{_label(s.model, s.dataset)} {format_score(s.score, s.half_width)} (n={s.n})"
                           for s in self.scores)
        diffs = ", ".join(f"{_label(f'{d.model} − {d.baseline}', d.dataset)} "
                          f"{format_difference(d.difference, d.low, d.high)}" for d in self.differences)
        return f"{self.metric}: {scores}" + (f"; {diffs}" if diffs else "")


def _label(name: str, dataset: str | None) -> str:
    return f"{dataset} {name}" if dataset else name


def format_score(score: float | None, half_width: float | None = None) -> str:
    """`70.0% ± 20.1` (percent, one decimal; the 95 % half-width when there is one), `-` for no score."""
    if score is None:
        return "-"
    return f"{score:.1f}%" + ("" if half_width is None else f" ± {half_width:.1f}")


def format_difference(difference: float | None, low: float | None = None, high: float | None = None) -> str:
    """`+2.5 [−8.3, +13.3]` (percent points, the paired 95 % interval when there is one)."""
    if difference is None:
        return "-"
    text = _signed(difference)
    return text if low is None or high is None else f"{text} [{_signed(low)}, {_signed(high)}]"


def _signed(value: float) -> str:
    return f"{value:+.1f}".replace("-", "−")


def proportion_half_width(correct: int, n: int) -> float | None:
    """The 95 % Wald half-width, in percent points, of `correct` out of `n` (None when n is 0)."""
    if n <= 0:
        return None
    p = correct / n
    return 100 * Z95 * math.sqrt(p * (1 - p) / n)


def mean_half_width(values: Sequence[float], scale: float = 100.0) -> float | None:
    """1.96 standard errors of the mean of `values` (sample std), times `scale` (None under two values)."""
    n = len(values)
    if n < 2:
        return None
    mean = math.fsum(values) / n
    variance = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    return scale * Z95 * math.sqrt(variance / n)


def stored_headline(scores: Mapping[str, Any] | None) -> Headline | None:
    """The headline a run's scores.json holds (None: no scores, or written before headlines existed)."""
    data = (scores or {}).get(HEADLINE_KEY)
    if not isinstance(data, Mapping):
        return None
    try:
        return Headline.from_json(data)
    except (TypeError, ValueError):
        return None


def cost_of(scores: Mapping[str, Any] | None) -> float | None:
    """The run's cost in dollars where scores.json has one (`usage.total.cost_usd`, written where the topology
    prices the models called; None: not priced)."""
    usage = (scores or {}).get("usage")
    total = usage.get("total") if isinstance(usage, Mapping) else None
    cost = total.get("cost_usd") if isinstance(total, Mapping) else None
    return float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None
