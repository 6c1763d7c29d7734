"""`ops eval healthbench` when the judge answers invalid JSON, and after kill -9."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from orchestra_ops.services.simllm.config import SimConfig
from orchestra_ops.services.simllm.faults import FaultPlan

from tests.helpers import run_ops
from tests.integration.eval_fixtures import kill9_mid_run, model_config, results, total
from tests.integration.healthbench_fixtures import (
    assert_scores_match,
    bundled_rows,
    expected_scores,
    grades,
    sim_candidate_token,
)
from tests.simserver import SimServer

MALFORMED = 0.06


def _config(tmp_path: Path, candidate: SimServer, judge: SimServer) -> Path:
    return model_config(tmp_path / "mc.json", {"candidate": [candidate], "judge": [judge]})


def test_six_percent_invalid_json_is_re_asked_and_every_grade_is_exact(
        tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    rows = bundled_rows()
    candidate = sim_server("candidate", args=["--latency-ms", "5"])
    judge = sim_server("judge", args=["--latency-ms", "5", "--malformed-rate", str(MALFORMED), "--seed", "3"])
    run_dir = tmp_path / "run"
    proc = run_ops(["eval", "healthbench", "--no-analyze", "--model-config", str(_config(tmp_path, candidate, judge)),
                    "--run-dir", str(run_dir), "--concurrency", "64"], timeout=300)
    assert proc.returncode == 0, proc.stderr
    records = {r["id"]: r for r in results(run_dir)}
    items = [item for r in records.values() for item in r["rubric_items"]]
    attempts = sum(item["attempts"] for item in items)
    graded = [item for item in items if item["criteria_met"] is not None]
    invalid_items = [item for item in items if item["criteria_met"] is None]
    # every judge request is an attempt of one item; every attempt but an item's last valid one was malformed
    assert total([judge], "sim_requests_total") == attempts
    malformed = total([judge], "sim_malformed_total")
    assert malformed == attempts - len(graded) and malformed > 20  # about 6 % of ~730 requests
    assert all(item["attempts"] == 3 and item["error_type"] == "grader_error" for item in invalid_items)
    assert any(item["attempts"] > 1 for item in graded)
    scores = json.loads((run_dir / "scores.json").read_text())
    assert scores["grader_error_items"] == len(invalid_items)
    ok_rows = [row for row in rows if records[row["prompt_id"]]["status"] == "ok"]
    assert len(ok_rows) == scores["scored"] == 64 - scores["grader_error_examples"]
    for row in rows:  # a re-asked item still gets the sim's exact verdict
        met = [item["criteria_met"] for item in records[row["prompt_id"]]["rubric_items"]]
        assert all(m is None or m == g for m, g in zip(met, grades(row, sim_candidate_token(row)), strict=True))
    assert_scores_match(scores["metrics"], expected_scores(ok_rows, bootstrap=False))


def test_grader_errors_are_counted_left_out_and_retry_failed_re_asks_only_them(
        tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    rows = bundled_rows()
    n_items = sum(len(r["rubrics"]) for r in rows)
    seed = 5
    plan = FaultPlan(SimConfig(model="judge", malformed_rate=MALFORMED, seed=seed))
    fates = [plan.next().malformed for _ in range(n_items * 2)]  # request k (1-based) gets fates[k - 1]
    candidate = sim_server("candidate", args=["--latency-ms", "5"])
    judge = sim_server("judge", args=["--latency-ms", "5", "--malformed-rate", str(MALFORMED), "--seed", str(seed)])
    run_dir = tmp_path / "run"
    base = ["eval", "healthbench", "--no-analyze",
            "--model-config", str(_config(tmp_path, candidate, judge)), "--run-dir",
            str(run_dir), "--concurrency", "64"]
    # one attempt per item: each judge request is one item's only attempt, so the count is order-free
    first = run_ops([*base, "--judge-attempts", "1"], timeout=300)
    assert first.returncode == 0, first.stderr
    expected_errors = sum(fates[:n_items])
    assert expected_errors > 5
    records = results(run_dir)
    failed = [r for r in records if r["status"] == "error"]
    assert all(r["error_type"] == "grader_error" and r["overall_score"] is None for r in failed)
    assert sum(r["grader_errors"] for r in failed) == expected_errors
    scores = json.loads((run_dir / "scores.json").read_text())
    assert (scores["grader_error_items"], scores["grader_error_examples"], scores["scored"]) == \
        (expected_errors, len(failed), 64 - len(failed))
    assert scores["failed_by_type"] == {"grader_error": len(failed)}
    assert scores["metrics"]["overall_score:n_samples"] == 64 - len(failed)  # left out, not scored as unmet
    assert (f"left out of the scores: {len(failed)} failed example(s) (grader_error {len(failed)}); "
            f"{expected_errors} rubric item(s) had no valid verdict after 1 attempt(s)") in \
        (run_dir / "eval.log").read_text()
    status = json.loads(run_ops(["eval-status", str(run_dir), "--json"]).stdout)
    assert status["failed_by_type"] == {"grader_error": len(failed)}

    sent, errors, lines = n_items, expected_errors, len(records)
    for _ in range(6):  # each pass asks exactly the items still without a grade, once each
        before = total([judge], "sim_requests_total")
        retry = run_ops([*base, "--retry-failed"], timeout=300)
        assert retry.returncode == 0, retry.stderr
        assert total([judge], "sim_requests_total") - before == errors
        assert total([candidate], "sim_requests_total") == 64  # the stored responses are reused
        now = results(run_dir)
        rerun, lines = now[lines:], len(now)
        still = sum(fates[sent:sent + errors])
        sent += errors
        assert sum(r.get("grader_errors", 0) for r in rerun) == still
        errors = still
        if not errors:
            break
    assert errors == 0
    final = {r["id"]: r for r in results(run_dir)}  # the last line of each id
    assert Counter(r["status"] for r in final.values()) == {"ok": 64}
    for row in rows:
        items = final[row["prompt_id"]]["rubric_items"]
        assert [i["criteria_met"] for i in items] == grades(row, sim_candidate_token(row))
    assert sum(i["attempts"] for r in final.values() for i in r["rubric_items"]) == sent
    scores = json.loads((run_dir / "scores.json").read_text())
    assert scores["grader_error_items"] == 0 and scores["scored"] == 64
    assert_scores_match(scores["metrics"], expected_scores(rows))


def test_kill_9_mid_run_then_resume_scores_every_example_once(tmp_path: Path,
                                                               sim_server: Callable[..., SimServer]) -> None:
    rows = bundled_rows()[:50]
    candidate = sim_server("candidate", args=["--latency-ms", "5"])
    judge = sim_server("judge", args=["--latency-ms", "150", "--malformed-rate", str(MALFORMED)])
    run_dir = tmp_path / "run"
    base = ["eval", "healthbench", "--no-analyze",
            "--model-config", str(_config(tmp_path, candidate, judge)), "--run-dir",
            str(run_dir), "--concurrency", "4"]
    kill9_mid_run([*base, "--limit", "50"], run_dir / "results.jsonl", 12)
    before = results(run_dir)
    assert 12 <= len(before) < 50

    resumed = run_ops([*base, "--resume"], timeout=300)  # the run dir remembers --limit 50
    assert resumed.returncode == 0, resumed.stderr
    after = results(run_dir)
    assert after[: len(before)] == before
    assert Counter(r["id"] for r in after) == Counter(r["prompt_id"] for r in rows)  # each exactly once
    scores = json.loads((run_dir / "scores.json").read_text())
    ok_rows = [row for row in rows if any(r["id"] == row["prompt_id"] and r["status"] == "ok" for r in after)]
    assert scores["scored"] == len(ok_rows) and scores["missing"] == 0
    assert_scores_match(scores["metrics"], expected_scores(ok_rows, bootstrap=False))


def test_a_judge_that_never_answers_validly_stops_at_the_bound_and_a_failing_one_keeps_its_kind(
        tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    rows = bundled_rows()[:3]
    n_items = sum(len(r["rubrics"]) for r in rows)
    candidate = sim_server("candidate", args=["--latency-ms", "5"])
    garbled = sim_server("judge", args=["--latency-ms", "5", "--malformed-rate", "1"])
    run_dir = tmp_path / "run"
    proc = run_ops(["eval", "healthbench", "--no-analyze", "--model-config", str(_config(tmp_path, candidate, garbled)),
                    "--run-dir", str(run_dir), "--limit", "3"], timeout=300)
    assert proc.returncode == 0, proc.stderr  # it completes: nothing loops forever
    assert total([garbled], "sim_requests_total") == 3 * n_items
    records = results(run_dir)
    assert [r["error_type"] for r in records] == ["grader_error"] * 3
    assert all(i["criteria_met"] is None and i["attempts"] == 3 and "in 3 attempt(s)" in i["error"]
               for r in records for i in r["rubric_items"])
    scores = json.loads((run_dir / "scores.json").read_text())
    assert (scores["scored"], scores["score"], scores["metrics"]) == (0, None, {})
    assert scores["grader_error_items"] == n_items
    assert "healthbench: 0 of 3 examples scored" in (run_dir / "eval.log").read_text()
    assert proc.stdout.splitlines()[-1].startswith("healthbench: no example scored · 0/3 ok, 3 failed")

    down = sim_server("judge", args=["--latency-ms", "5", "--fail", "500:1"])
    config = model_config(tmp_path / "down.json", {"candidate": [candidate], "judge": [down]})
    failed = run_ops(["eval", "healthbench", "--no-analyze",
                      "--model-config", str(config), "--run-dir", str(tmp_path / "down"),
                      "--limit", "1", "--max-retries", "1"], timeout=300)
    assert failed.returncode == 0, failed.stderr
    (record,) = results(tmp_path / "down")
    assert record["status"] == "error" and record["error_type"] == "http_500" and record["grader_errors"] == 0
    assert record["response_source"] == "candidate" and record["response"]  # kept for --retry-failed
    assert all(i["error_type"] == "http_500" and i["attempts"] == 1 for i in record["rubric_items"])
    assert json.loads((tmp_path / "down" / "scores.json").read_text())["failed_by_type"] == {"http_500": 1}
