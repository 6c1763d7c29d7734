"""`ops eval healthbench` over real sim servers: exact scores, the judge's own cap, --responses, templates."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from tests.helpers import model_calls, run_ops
from tests.integration.eval_fixtures import model_config, results, total
from tests.integration.healthbench_fixtures import (
    assert_scores_match,
    bundled_rows,
    expected_scores,
    grades,
    reference_metrics,
    sim_candidate_token,
    write_responses,
)
from tests.simserver import SimServer


def _sims(sim_server: Callable[..., SimServer], tmp_path: Path, judge_args: list[str],
          candidate_args: list[str] | None = None) -> tuple[SimServer, SimServer, Path]:
    candidate = sim_server("candidate", args=candidate_args or ["--latency-ms", "5"])
    judge = sim_server("judge", args=judge_args)
    return candidate, judge, model_config(tmp_path / "mc.json", {"candidate": [candidate], "judge": [judge]})


def test_exact_scores_overall_and_per_tag(tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    rows = bundled_rows()
    candidate, judge, config = _sims(sim_server, tmp_path, ["--latency-ms", "5"])
    run_dir = tmp_path / "run"
    proc = run_ops(["eval", "healthbench", "--no-analyze", "--model-config", str(config), "--run-dir", str(run_dir),
                    "--concurrency", "64"], timeout=300)
    assert proc.returncode == 0, proc.stderr

    # the premises the bundled set must meet for this test to mean something
    expected_per_example = [reference_metrics(r, grades(r, sim_candidate_token(r))) for r in rows]
    met_negatives = sum(1 for r in rows for item, ok in zip(r["rubrics"], grades(r, sim_candidate_token(r)),
                                                               strict=True) if ok and item["points"] < 0)
    assert met_negatives > 0
    negative_only = [(i, tag) for i, r in enumerate(rows) for tag in {t for it in r["rubrics"] for t in it["tags"]}
                     if tag.startswith("axis:") and all(it["points"] < 0 for it in r["rubrics"] if tag in it["tags"])]
    assert negative_only and all(tag not in expected_per_example[i] for i, tag in negative_only)
    assert any(len(r["prompt"]) > 1 for r in rows)

    scores = json.loads((run_dir / "scores.json").read_text())
    expected = expected_scores(rows)
    assert_scores_match(scores["metrics"], expected)
    assert scores["score"] == scores["metrics"]["overall_score"] == expected["overall_score"]
    for axis in ("accuracy", "completeness", "communication_quality", "context_awareness", "instruction_following"):
        assert f"axis:{axis}:bootstrap_std" in scores["metrics"]
    assert {k: scores[k] for k in ("examples", "scored", "grader_error_examples", "grader_error_items", "failed",
                                   "missing", "rubric_items")} == {
        "examples": 64, "scored": 64, "grader_error_examples": 0, "grader_error_items": 0, "failed": 0,
        "missing": 0, "rubric_items": sum(len(r["rubrics"]) for r in rows)}
    assert scores["judge"] == {"name": "judge", "temperature": 0.5, "max_tokens": 2048,
                               "system": "You are a helpful assistant.", "attempts": 3}

    records = results(run_dir)
    assert [r["id"] for r in sorted(records, key=lambda r: r["id"])] == [r["prompt_id"] for r in rows]
    by_id = {r["id"]: r for r in records}
    for row, metrics in zip(rows, expected_per_example, strict=True):
        record = by_id[row["prompt_id"]]
        assert record["status"] == "ok" and record["overall_score"] == metrics["overall_score"]
        assert [(i["criterion"], i["points"], i["tags"]) for i in record["rubric_items"]] == \
            [(i["criterion"], i["points"], i["tags"]) for i in row["rubrics"]]
        assert [i["criteria_met"] for i in record["rubric_items"]] == grades(row, sim_candidate_token(row))
        assert all(i["attempts"] == 1 and i["explanation"] for i in record["rubric_items"])
        assert sim_candidate_token(row) in record["response"] and record["response_source"] == "candidate"
        assert record["judge_calls"] == len(row["rubrics"]) and record["grader_errors"] == 0

    items = sum(len(r["rubrics"]) for r in rows)
    assert total([candidate], "sim_requests_total") == 64
    assert total([judge], "sim_requests_total") == items
    events = [json.loads(line) for line in (run_dir / "profile.jsonl").read_text().splitlines()]
    roles = Counter(e["role"] for e in events if e["type"] == "model_call")
    assert roles == {"candidate": 64, "judge": items}
    assert proc.stdout.count("[TASK_COMPLETE]") == 64
    log = (run_dir / "eval.log").read_text()  # the per-tag table: eval.log (the console with -v)
    assert f"healthbench: 64 of 64 examples scored ({items} rubric items, judge 'judge')" in log
    table = next(line for line in log.splitlines() if line.strip().startswith("overall_score"))
    assert table.split() == ["overall_score", f"{expected['overall_score']:.4f}", "64",
                             f"{expected['overall_score:bootstrap_std']:.4f}"]


def test_the_judge_cap_is_shared_by_every_example_in_flight(tmp_path: Path,
                                                            sim_server: Callable[..., SimServer]) -> None:
    rows = bundled_rows()[:20]
    _, judge, config = _sims(sim_server, tmp_path, ["--latency-ms", "300"])
    run_dir = tmp_path / "run"
    proc = run_ops(["eval", "healthbench", "--no-analyze", "--model-config", str(config), "--run-dir", str(run_dir),
                    "--limit", "20", "--concurrency", "20", "--judge-concurrency", "40"], timeout=300)
    assert proc.returncode == 0, proc.stderr
    # more items than the cap were ready at once, so the judge saw exactly the cap, never more
    assert sum(len(r["rubrics"]) for r in rows) > 40
    assert judge.metrics()["sim_max_requests_in_flight"] == 40
    assert json.loads((run_dir / "run.json").read_text())["suite_options"]["judge_concurrency"] == 40

    one_at_a_time = run_ops(["eval", "healthbench", "--no-analyze",
                             "--model-config", str(config), "--run-dir", str(tmp_path / "one"),
                             "--limit", "1", "--concurrency", "1"], timeout=300)
    assert one_at_a_time.returncode == 0, one_at_a_time.stderr
    # one example: all of its items in flight together, not one after another (each takes 300 ms)
    events = model_calls(tmp_path / "one")
    starts = sorted(e["start"] for e in events if e["role"] == "judge")
    assert len(starts) == len(rows[0]["rubrics"]) and starts[-1] - starts[0] < 0.3


def test_responses_file_makes_no_candidate_call(tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    rows = bundled_rows()[:20]

    def token_of(row: dict) -> str:
        from orchestra_ops.services.simllm import replies

        return replies.answer_token(f"response to {row['prompt_id']}")

    responses = write_responses(tmp_path / "responses.jsonl", rows, token_of)
    candidate, judge, config = _sims(sim_server, tmp_path, ["--latency-ms", "5"])
    run_dir = tmp_path / "run"
    proc = run_ops(["eval", "healthbench", "--no-analyze", "--model-config", str(config), "--run-dir", str(run_dir),
                    "--limit", "20", "--responses", str(responses)], timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert total([candidate], "sim_requests_total") == 0
    assert total([judge], "sim_requests_total") == sum(len(r["rubrics"]) for r in rows)
    log = (run_dir / "eval.log").read_text()
    assert "  judge     -> judge [model]" in log and "candidate -> candidate [model] -> " in log
    assert f"candidate [model] -> 127.0.0.1:{candidate.port} *" not in log  # not called
    assert "models called: judge [1 replica]" in proc.stdout
    scores = json.loads((run_dir / "scores.json").read_text())
    assert_scores_match(scores["metrics"], expected_scores(rows, token_of))
    assert all(r["response_source"] == "responses_file" and r["candidate"] is None for r in results(run_dir))

    short = tmp_path / "short.jsonl"
    short.write_text("".join(responses.read_text().splitlines(keepends=True)[:18]))
    missing = run_ops(["eval", "healthbench", "--no-analyze",
                       "--model-config", str(config), "--run-dir", str(tmp_path / "r2"),
                       "--limit", "20", "--responses", str(short)])
    assert missing.returncode == 2
    assert (f"{short}: no response for 2 of the 20 examples to grade: 'synth-hb-0019', 'synth-hb-0020'"
            in missing.stderr) and "Traceback" not in missing.stderr
    both = run_ops(["eval", "healthbench", "--no-analyze",
                    "--model-config", str(config), "--run-dir", str(tmp_path / "r3"),
                    "--responses", str(responses), "--model", "candidate"])
    assert both.returncode == 2 and "give one or the other" in both.stderr
    assert total([candidate], "sim_requests_total") == 0


def test_a_grader_template_drops_in_and_its_sha256_is_recorded(tmp_path: Path,
                                                               sim_server: Callable[..., SimServer]) -> None:
    rows = bundled_rows()[:10]
    template = tmp_path / "published_grader.txt"
    template.write_text("Grade the last turn.\n\n# Conversation\n<<conversation>>\n\n# Rubric item\n<<rubric_item>>\n\n"
                        "# Instructions\nReturn a JSON object with \"explanation\" and \"criteria_met\".\n")
    _, _, config = _sims(sim_server, tmp_path, ["--latency-ms", "5"])
    run_dir = tmp_path / "run"
    proc = run_ops(["eval", "healthbench", "--no-analyze", "--model-config", str(config), "--run-dir", str(run_dir),
                    "--limit", "10", "--template", f"grader={template}"], timeout=300)
    assert proc.returncode == 0, proc.stderr
    recorded = json.loads((run_dir / "run.json").read_text())["templates"]["grader"]
    assert recorded == {"source": str(template), "sha256": hashlib.sha256(template.read_bytes()).hexdigest()}
    assert_scores_match(json.loads((run_dir / "scores.json").read_text())["metrics"],
                        expected_scores(rows, bootstrap=False))

    bad = tmp_path / "bad.txt"
    bad.write_text("# Conversation\n<<conversation>>\n")
    refused = run_ops(["eval", "healthbench", "--no-analyze",
                       "--model-config", str(config), "--run-dir", str(tmp_path / "r2"),
                       "--template", f"grader={bad}"])
    assert refused.returncode == 2 and "has no placeholder {rubric_item}" in refused.stderr


def test_a_bad_dataset_line_is_named(tmp_path: Path) -> None:
    config = tmp_path / "mc.json"
    config.write_text(json.dumps({"candidate": [{"ip_addr": "127.0.0.1", "port": 9}],
                                  "judge": [{"ip_addr": "127.0.0.1", "port": 9}]}))
    row = bundled_rows()[0]
    data = tmp_path / "d.jsonl"
    bad = {**row, "rubrics": [*row["rubrics"][:2], {"criterion": "x", "points": "5", "tags": []}]}
    data.write_text(json.dumps(row) + "\n" + json.dumps({**bad, "prompt_id": "p2"}) + "\n")
    proc = run_ops(["eval", "healthbench", "--no-analyze", "--model-config", str(config), "--dataset", str(data),
                    "--run-dir", str(tmp_path / "run")])
    assert proc.returncode == 2, proc.stderr
    assert f"{data}:2 (prompt_id p2): rubrics[2]: \"points\" must be a number" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "run").exists()
