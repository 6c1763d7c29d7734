"""The exact HealthBench scores a run over the sim must report, computed here from the sim's rules and
the reference's formulas (scoring.md A7-A9), independently of the suite's code."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from orchestra_ops.services.simllm import healthbench_rules as rubric_rules
from orchestra_ops.services.simllm import replies

BUNDLED = Path(__file__).resolve().parents[2] / "evals" / "healthbench" / "data" / "healthbench_synthetic.jsonl"
Row = dict[str, Any]


def bundled_rows() -> list[Row]:
    return [json.loads(line) for line in BUNDLED.read_text().splitlines() if line.strip()]


def sim_candidate_token(row: Row) -> str:
    """The sim candidate answers `\\boxed{answer_token(first user message)}` (rules.py, expert)."""
    first_user = next(m["content"] for m in row["prompt"] if m["role"] == "user")
    return replies.answer_token(first_user)


def grades(row: Row, token: str) -> list[bool]:
    return [rubric_rules.criteria_met(token, item["criterion"]) for item in row["rubrics"]]


def reference_score(items: Sequence[Row], met: Sequence[bool]) -> float | None:
    """calculate_score (A7): met points (negatives subtract) over the positive points; None if there are none."""
    positive = sum(item["points"] for item in items if item["points"] > 0)
    if positive == 0:
        return None
    return sum(item["points"] for item, ok in zip(items, met, strict=True) if ok) / positive


def reference_metrics(row: Row, met: Sequence[bool]) -> dict[str, float]:
    """grade_sample's metrics (A8): overall, example tags = overall, rubric tags on their own items."""
    overall = reference_score(row["rubrics"], met)
    assert overall is not None
    out = {"overall_score": overall}
    for tag in row["example_tags"]:
        out[tag] = overall
    tags = {t for item in row["rubrics"] for t in item["tags"]}
    for tag in tags:
        chosen = [(item, ok) for item, ok in zip(row["rubrics"], met, strict=True) if tag in item["tags"]]
        score = reference_score([c[0] for c in chosen], [c[1] for c in chosen])
        if score is not None:
            out[tag] = score
    return out


def reference_bootstrap_std(values: Sequence[float], name: str, seed: int = 0, resamples: int = 1000) -> float:
    """The documented procedure written out by hand: each draw is values[floor(random() * n)] from
    random.Random("healthbench-bootstrap:SEED:NAME"); the std is over the draws' clipped means (ddof 0)."""
    rng = random.Random(f"healthbench-bootstrap:{seed}:{name}")
    n = len(values)
    means = []
    for _ in range(resamples):
        total = 0.0
        for _ in range(n):
            total += values[math.floor(rng.random() * n)]
        means.append(min(1.0, max(0.0, total / n)))
    mu = sum(means) / len(means)
    return math.sqrt(sum((m - mu) ** 2 for m in means) / len(means))


def expected_scores(rows: Sequence[Row], token_of: Callable[[Row], str] = sim_candidate_token,
                    bootstrap: bool = True) -> dict[str, float | int]:
    """The clipped-mean aggregation (A9) over these rows, with the reference's key names."""
    values: dict[str, list[float]] = {}
    for row in rows:
        metrics = reference_metrics(row, grades(row, token_of(row)))
        for name, value in metrics.items():
            values.setdefault(name, []).append(value)
        values.setdefault("score", []).append(metrics["overall_score"])
    out: dict[str, float | int] = {}
    for name, vals in values.items():
        out[name] = min(1.0, max(0.0, sum(vals) / len(vals)))
        out[f"{name}:n_samples"] = len(vals)
        if bootstrap:
            out[f"{name}:bootstrap_std"] = reference_bootstrap_std(vals, name)
    return out


def assert_scores_match(actual: dict[str, Any], expected: dict[str, float | int]) -> None:
    """Same keys (bootstrap keys only where expected has them); n exact, means and stds to 1e-9."""
    shown = {k: v for k, v in actual.items()
             if not k.endswith(":bootstrap_std") or k in expected}
    assert sorted(shown) == sorted(expected)
    for key, value in expected.items():
        if key.endswith(":n_samples"):
            assert actual[key] == value, key
        else:
            assert math.isclose(actual[key], value, rel_tol=1e-9, abs_tol=1e-12), (key, actual[key], value)


def write_responses(path: Path, rows: Sequence[Row], token_of: Callable[[Row], str]) -> Path:
    path.write_text("".join(json.dumps({"prompt_id": row["prompt_id"],
                                        "response": f"Here is what I suggest. In short: \\boxed{{{token_of(row)}}}."})
                            + "\n" for row in rows))
    return path
