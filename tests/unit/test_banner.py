"""What `ops eval` says at its start and end (runner/banner.py) and the one score format (core/headline.py)."""

from __future__ import annotations

from pathlib import Path

from orchestra_ops.client.routing import Routing, Target
from orchestra_ops.core.headline import (
    Headline,
    ModelScore,
    ScoreDifference,
    format_difference,
    format_score,
    mean_half_width,
    proportion_half_width,
    stored_headline,
)
from orchestra_ops.runner.banner import BANNER_LINES, RunFacts, banner, models_called, result_line

ROUTING = Routing(
    source="lab.yaml", name="lab", endpoints_file="mc.json",
    roles={"orchestrator": "orchestrator", "search": "answer", "reasoner": "answer", "judge": "judge"},
    targets={"orchestrator": Target("orchestrator", "model", "sim/o", (("h", 1), ("h", 2))),
             "answer": Target("answer", "model", "sim/a", (("h", 3),)),
             "judge": Target("judge", "provider", "gpt-5", base_url="https://api.example/v1")})


def test_the_banner_is_three_lines_of_at_most_six() -> None:
    facts = RunFacts("hle", "lab", Path("runs/hle-lab"), 20, 6, 12, 2, "resume")
    lines = banner(facts, ROUTING, ["orchestrator", "search", "reasoner", "answer", "judge"], verbose=False)
    assert lines == [
        "ops eval hle on lab: 20 samples, 6 to run (resume; 12 ok and 2 failed before)",
        "models called: orchestrator [2 replicas]; answer as search, reasoner [1 replica]; judge [external gpt-5]",
        "run dir runs/hle-lab (every line also in eval.log; -v shows the routing, aliases, budgets and sandbox)"]
    assert len(lines) <= BANNER_LINES
    verbose = banner(facts, ROUTING, ["judge"], verbose=True)
    assert verbose[2] == "run dir runs/hle-lab (every line also in eval.log)"


def test_models_called_names_each_target_once() -> None:
    assert models_called(ROUTING, ["search", "answer"]) == "answer as search [1 replica]"


def test_one_score_format() -> None:
    assert format_score(70.0, 20.08) == "70.0% ± 20.1" and format_score(53.04) == "53.0%" and format_score(None) == "-"
    assert format_difference(-20.0, -53.6485, 13.6485) == "−20.0 [−53.6, +13.6]"
    assert format_difference(2.5) == "+2.5" and format_difference(None) == "-"
    assert round(proportion_half_width(14, 20) or 0, 4) == 20.084  # 1.96 · sqrt(.7 · .3 / 20), in points
    assert proportion_half_width(0, 0) is None and mean_half_width([1.0]) is None
    assert round(mean_half_width([0.0, 1.0, 0.0, 1.0]) or 0, 4) == 56.5803  # 1.96 · s / sqrt(n), s = sqrt(1/3)


def test_the_result_line_and_the_headline_in_scores_json() -> None:
    headline = Headline("accuracy", scores=[ModelScore("answer", 70.0, 20.1, 20), ModelScore("ft", 72.5, 19.6, 20)],
                        differences=[ScoreDifference("ft", "answer", 2.5, -8.3, 13.3, 20)])
    scores = {"headline_scores": headline.to_json(), "usage": {"by_role": {}, "total": {"cost_usd": 1.234}}}
    assert stored_headline(scores) == headline and stored_headline({}) is None
    line = result_line("gsm8k", scores, ok=38, failed=2, total=40, wall_s=75.2, calls=80, tokens=31204,
                       run_dir=Path("runs/gsm8k-lab"))
    assert line == ("gsm8k: accuracy: answer 70.0% ± 20.1 (n=20), ft 72.5% ± 19.6 (n=20); ft − answer +2.5 "
                    "[−8.3, +13.3] · 38/40 ok, 2 failed (--retry-failed reruns them) · 1m15s · 80 calls · "
                    "31,204 tokens · $1.23 · runs/gsm8k-lab")
    assert "{" not in line and "'" not in line  # no Python dict, ever
