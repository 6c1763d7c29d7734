"""`ops compare`: equivalence (ids, dataset, prompt templates, judge), the paired score difference
with its bootstrap interval and McNemar's test, latency deltas, and --require-equivalent."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from orchestra_ops.analysis.compare import compare_runs
from orchestra_ops.analysis.significance import binomial_two_sided, mcnemar, paired_bootstrap
from tests.helpers import run_ops
from tests.runfactory import manifest_run_info, model_event, write_run

TEMPLATES = {"orchestrator": "You are the orchestrator. {problem}", "judge": "Is {answer} correct? {truth}"}
JUDGE = {"temperature": 0.0, "max_tokens": 512}  # the judge's request defaults


def _run(root: Path, name: str, correct: dict[Any, bool], *, latency: float = 1.0, ids: list[Any] | None = None,
         templates: dict[str, str] | None = None, judge: dict[str, Any] | None = None,
         model: str = "m", dataset_text: str | None = None, suite_options: dict[str, Any] | None = None) -> Path:
    """A run dir over dataset `ids` (default: the keys of `correct`) with results for the keys of `correct`."""
    dataset_ids = ids if ids is not None else list(correct)
    info = manifest_run_info(root / f"{name}-inputs", ids=dataset_ids, templates=templates or TEMPLATES,
                             judge_defaults=JUDGE if judge is None else judge, models=[model],
                             dataset_text=dataset_text, suite_options=suite_options)
    results = [{"id": i, "status": "ok", "correct": c, "elapsed": latency * 2} for i, c in correct.items()]
    events = [model_event("orchestrator", n * 0.1, latency, model=model, task=i) for n, i in enumerate(correct)]
    return write_run(root / name, results=results, events=events, run_info=info)




def test_equivalent_runs(tmp_path: Path) -> None:
    ids = [f"q{i}" for i in range(40)]
    a = _run(tmp_path, "a", {i: n % 2 == 0 for n, i in enumerate(ids)}, latency=1.0, model="qwen-8b")
    b = _run(tmp_path, "b", {i: n % 4 != 3 for n, i in enumerate(ids)}, latency=1.5, model="qwen-32b")
    result = compare_runs(a, b)
    assert result.equivalent, result.differences
    # the routing is what is compared: listed, not a difference
    assert [d.item for d in result.intended] == ["routing", "endpoints"]  # other models, other endpoints file
    assert "qwen-8b" in result.intended[0].detail and "qwen-32b" in result.intended[0].detail
    assert result.score is not None and result.score["metric"] == "accuracy"
    assert (result.score["a"], result.score["b"]) == (0.5, 0.75)
    roles = {(r["group"], r["name"]): r for r in result.latency}
    assert roles[("role", "orchestrator")]["mean_delta"] == pytest.approx(0.5)
    assert roles[("tasks", "end to end")]["p50_delta"] == pytest.approx(1.0)

    cli = run_ops(["compare", str(a), str(b), "--require-equivalent"])
    assert cli.returncode == 0, cli.stderr
    assert "equivalent" in cli.stdout and "NOT" not in cli.stdout and "McNemar" in cli.stdout


def test_different_ids_are_named(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", {f"q{i}": True for i in range(10)})
    b = _run(tmp_path, "b", {f"q{i}": True for i in range(3, 13)})
    result = compare_runs(a, b)
    assert not result.equivalent
    items = {d.item: d.detail for d in result.differences}
    assert set(items) == {"dataset ids", "dataset file", "ids"}
    assert "10 vs 10 ids" in items["dataset ids"]
    details = [d.detail for d in result.differences if d.item == "ids"]
    assert details == ["3 id(s) have results only in run A: 'q0', 'q1', 'q2'",
                       "3 id(s) have results only in run B: 'q10', 'q11', 'q12'"]
    assert result.score is not None and result.score["shared_ids"] == 7  # scored over the shared ids only

    cli = run_ops(["compare", str(a), str(b), "--require-equivalent"])
    assert cli.returncode == 1
    assert "not equivalent (dataset file, dataset ids, ids)" in cli.stderr
    assert "NOT equivalent" in cli.stdout


def test_unfinished_run_is_not_equivalent(tmp_path: Path) -> None:
    ids = [f"q{i}" for i in range(10)]
    a = _run(tmp_path, "a", {i: True for i in ids})
    b = _run(tmp_path, "b", {i: True for i in ids[:8]}, ids=ids)  # same dataset, two tasks never finished
    result = compare_runs(a, b)
    assert [(d.item, d.detail) for d in result.differences] == [
        ("ids", "2 id(s) have results only in run A: 'q8', 'q9'")]


def test_different_prompt_templates_and_judge(tmp_path: Path) -> None:
    ids = list(range(6))
    a = _run(tmp_path, "a", {i: True for i in ids})
    changed = {**TEMPLATES, "judge": TEMPLATES["judge"] + " Answer yes or no."}
    b = _run(tmp_path, "b", {i: True for i in ids}, templates=changed,
             judge={**JUDGE, "temperature": 0.7})
    result = compare_runs(a, b)
    items = [d.item for d in result.differences]
    assert items == ["template 'judge'", "judge"]
    assert "the prompt texts differ" in result.differences[0].detail
    assert "0.7" in result.differences[1].detail
    c = _run(tmp_path, "c", {i: True for i in ids}, templates={**TEMPLATES, "extra": "new"})
    assert [(d.item, d.detail) for d in compare_runs(a, c).differences] == [("template 'extra'", "used only by run B")]


def test_only_the_suite_options_that_differ_are_named(tmp_path: Path) -> None:
    ids = list(range(6))
    same = {"judge": "judge", "aliases": ["search-*=answer"], "sampling": []}
    a = _run(tmp_path, "a", {i: True for i in ids}, suite_options={**same, "max_rounds": 50, "budgets": []})
    b = _run(tmp_path, "b", {i: True for i in ids}, suite_options={**same, "max_rounds": 2,
                                                                    "budgets": ["expert_context=8000"]})
    result = compare_runs(a, b)
    assert [(d.item, d.detail) for d in result.differences] == [
        ("suite options", "budgets: (none) → expert_context=8000; max_rounds: 50 → 2")]
    cli = run_ops(["compare", str(a), str(b)], env={"COLUMNS": "100"})
    assert cli.returncode == 0, cli.stderr
    assert "max_rounds: 50 → 2" in cli.stdout and "search-*=answer" not in cli.stdout


def test_run_without_manifest_cannot_be_proven_equivalent(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", {0: True})
    b = write_run(tmp_path / "b", results=[{"id": 0, "status": "ok", "correct": True}])
    result = compare_runs(a, b)
    assert [d.item for d in result.differences] == ["manifest"]
    assert "run B" in result.differences[0].detail


def test_known_accuracy_difference_is_inside_the_interval(tmp_path: Path) -> None:
    ids = list(range(400))
    a = _run(tmp_path, "a", {i: i % 2 == 0 for i in ids})  # 50 %
    b = _run(tmp_path, "b", {i: i % 4 != 3 for i in ids})  # 75 %: right on every id A got right, and 100 more
    result = compare_runs(a, b, resamples=4000, seed=1)
    score = result.score
    assert score is not None
    interval = score["interval"]
    assert interval["difference"] == 0.25
    assert interval["low"] <= 0.25 <= interval["high"] and interval["low"] > 0  # 0 is outside: a real gain
    se = (0.25 * 0.75 / 400) ** 0.5  # d is 0 or 1 with P(1) = 0.25
    assert interval["high"] - interval["low"] == pytest.approx(2 * 1.96 * se, rel=0.15)
    assert score["mcnemar"] == {"a_right_b_wrong": 0, "a_wrong_b_right": 100, "p_value": 2.0**-99,
                                "method": "exact two-sided binomial on discordant pairs"}
    as_json = run_ops(["compare", str(a), str(b), "--json", "--resamples", "4000", "--seed", "1"])
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["score"]["interval"] == interval  # seeded: the same interval again


def test_interval_covers_the_true_difference_of_simulated_systems() -> None:
    rng = random.Random(2024)
    n = 2000
    truth = [rng.random() for _ in range(n)]
    a = [1.0 if t < 0.40 else 0.0 for t in truth]  # true accuracy 40 %
    b = [1.0 if t < 0.46 else 0.0 for t in truth]  # true accuracy 46 %, right wherever A is
    interval = paired_bootstrap(a, b, resamples=2000, seed=3)
    assert interval.covers(0.06) and not interval.covers(0.0)


def test_mcnemar_exact_values() -> None:
    assert binomial_two_sided(0, 0) == 1.0
    assert binomial_two_sided(1, 10) == pytest.approx(2 * 11 / 1024)
    assert binomial_two_sided(5, 10) == 1.0
    result = mcnemar([1, 1, 1, 0, 0, 0, 1], [0, 0, 1, 1, 0, 0, 1])  # b=2 (A only), c=1 (B only)
    assert (result.a_only, result.b_only, result.p_value) == (2, 1, 1.0)
    assert binomial_two_sided(100, 5000) < 1e-300 or binomial_two_sided(100, 5000) == 0.0


def test_differently_scored_runs_get_no_score_difference(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", {0: True, 1: False})
    b = write_run(tmp_path / "b", results=[{"id": 0, "status": "ok", "score": 0.5}, {"id": 1, "status": "ok",
                                                                                       "score": 1.0}],
                  run_info=json.loads((a / "run.json").read_text()))
    result = compare_runs(a, b)
    assert result.score is None and "A: accuracy, B: score" in (result.score_note or "")


def test_grader_errors_are_left_out_of_the_score(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", results=[{"id": i, "status": "ok", "correct": True} for i in range(4)])
    b = write_run(tmp_path / "b", results=[{"id": 0, "status": "error", "error_type": "grader_error"},
                                           {"id": 1, "status": "error", "error_type": "http_500"},
                                           {"id": 2, "status": "ok", "correct": True},
                                           {"id": 3, "status": "ok", "correct": False}])
    score = compare_runs(a, b).score
    assert score is not None
    assert score["shared_ids"] == 3 and score["b"] == pytest.approx(1 / 3)  # id 1 errored: wrong; id 0: out


def test_compare_bad_run_dir(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", results=[{"id": 0, "status": "ok"}])
    cli = run_ops(["compare", str(a), str(tmp_path / "missing")])
    assert cli.returncode == 2 and "missing: no such run dir" in cli.stderr and "Traceback" not in cli.stderr


def test_a_different_affinity_is_named_and_keeps_the_runs_equivalent(tmp_path: Path) -> None:
    ids = [f"q{i}" for i in range(10)]
    a = _run(tmp_path, "a", {i: True for i in ids})
    b = _run(tmp_path, "b", {i: True for i in ids})
    info = json.loads((b / "run.json").read_text())
    rows = [r for r in info["routing"] if r["role"] == "m"]
    assert rows and rows[0]["affinity"] == {"mode": "session", "load_factor": 1.25}  # what `ops eval` records
    rows[0]["affinity"] = {"mode": "none", "load_factor": 1.25}  # as `ops eval --affinity none` records it
    (b / "run.json").write_text(json.dumps(info))
    result = compare_runs(a, b)
    assert result.equivalent, result.differences
    assert [(d.item, d.detail) for d in result.intended if d.item == "affinity"] == [
        ("affinity", "m: A session (load factor 1.25), B none")]
    assert "routing" not in [d.item for d in result.intended]  # the affinity alone differs: named once
