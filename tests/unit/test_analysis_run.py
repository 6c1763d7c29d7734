"""`ops analyze` on synthetic run dirs whose every number is known: per role, model, tool (end to end
and expert alone), tokens, errors by type, slowest tasks, throughput, and the files it writes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from orchestra_ops.analysis.analyze import analyze_run
from orchestra_ops.analysis.timeline import busy_seconds, timeline
from orchestra_ops.runner.profile_reader import read_profile
from tests.helpers import run_ops
from tests.runfactory import T0, model_event, tool_event, write_run


def _hle_like(run_dir: Path) -> Path:
    events = [model_event("orchestrator", float(i), i / 10, model="orch-8b", task=f"t{i}",
                          prompt_tokens=100 + i, completion_tokens=10, typed=i % 2 == 0)  # half untyped (old)
              for i in range(1, 102)]
    events += [model_event("orchestrator", 200.0, 50.0, model="orch-8b", status="http_500", task="t1",
                           prompt_tokens=None, completion_tokens=None, attempts=3) for _ in range(3)]
    events += [model_event("answer", 300.0 + i, 2.0, model="qwen", task=f"t{i}") for i in range(20)]
    events += [tool_event("search", 400.0 + i, 3 + 0.5 * i, expert=1 + 0.1 * i,
                          parts={"retrieval": 2 + 0.4 * i}, task=f"t{i}") for i in range(11)]
    events += [tool_event("answer", 500.0 + i, 10.0 + i, expert=8.0 + i, parts={"judge": 2.0},
                          task=f"t{i}") for i in range(4)]
    events.append(tool_event("enhance_reasoning", 600.0, 99.0, expert=None, parts={}, status="sandbox_timeout"))
    results = [{"id": f"t{i}", "status": "ok", "correct": i % 3 == 0, "elapsed": float(i)} for i in range(95)]
    results += [{"id": f"t{i}", "status": "error", "error_type": "task_timeout", "elapsed": float(i)}
                for i in range(95, 99)]
    results += [{"id": f"t{i}", "status": "error", "error_type": "http_500", "elapsed": 0.5} for i in (99, 100)]
    write_run(run_dir, results=results, events=events, run_info={"suite": "hle"}, scores={"accuracy": 0.3})
    with open(run_dir / "profile.jsonl", "a") as handle:
        handle.write('{"type": "model_call", "role": "torn')  # a crash mid-write
    return run_dir


def test_stats_per_role_model_and_tool_are_exact(tmp_path: Path) -> None:
    run = _hle_like(tmp_path / "run")
    stats = analyze_run(run, plots=False).stats
    orch = stats["by_role"]["orchestrator"]
    assert (orch["count"], orch["errors"], orch["retried"]) == (101, 3, 3)  # failed calls: counted, not timed
    assert (orch["min"], orch["max"], orch["mean"]) == pytest.approx((0.1, 10.1, 5.1))
    assert (orch["p10"], orch["p25"], orch["p50"], orch["p90"], orch["p95"], orch["p99"]) == pytest.approx(
        (1.1, 2.6, 5.1, 9.1, 9.6, 10.0))
    assert orch["std"] == pytest.approx(math.sqrt(850) / 10)
    assert orch["under_5s"] == pytest.approx(49 / 101)  # 0.1 … 4.9
    assert orch["prompt_tokens"] == {"count": 101, "sum": sum(100 + i for i in range(1, 102)),
                                     "mean": pytest.approx(151.0)}
    assert stats["by_model"]["orch-8b"]["count"] == 101 and stats["by_model"]["qwen"]["p99"] == 2.0
    assert stats["by_role"]["answer"]["under_5s"] == 1.0

    search = stats["by_tool"]["e2e"]["search"]
    assert (search["count"], search["min"], search["max"], search["p50"]) == pytest.approx((11, 3.0, 8.0, 5.5))
    search_expert = stats["by_tool"]["expert"]["search"]
    assert (search_expert["min"], search_expert["max"], search_expert["p50"]) == pytest.approx((1.0, 2.0, 1.5))
    assert stats["by_tool"]["expert"]["answer"]["mean"] == pytest.approx(9.5)  # the expert alone, not the judge
    assert stats["by_tool"]["e2e"]["answer"]["mean"] == pytest.approx(11.5)
    assert stats["by_tool"]["e2e"]["enhance_reasoning"] == {**stats["by_tool"]["e2e"]["enhance_reasoning"],
                                                            "count": 0, "errors": 1}
    assert stats["by_tool"]["e2e"]["(all)"]["count"] == 15
    assert stats["tool_parts"]["answer"]["judge"]["mean"] == 2.0
    assert stats["tool_parts"]["answer"]["expert"]["mean"] == pytest.approx(9.5)
    assert list(stats["tool_parts"]["search"]) == ["expert", "retrieval"]
    assert stats["tool_parts"]["search"]["retrieval"]["max"] == pytest.approx(6.0)

    tasks = stats["tasks"]
    assert (tasks["finished"], tasks["ok"], tasks["failed"]) == (101, 95, 6)
    assert tasks["errors_by_type"] == {"task_timeout": 4, "http_500": 2}
    assert [t["id"] for t in tasks["slowest"]] == ["t98", "t97", "t96", "t95", "t94", "t93", "t92", "t91", "t90",
                                                   "t89"]
    assert tasks["slowest"][0] == {"id": "t98", "elapsed": 98.0, "status": "error", "error_type": "task_timeout"}
    assert stats["calls"]["errors_by_type"] == {"http_500": 3, "enhance_reasoning:sandbox_timeout": 1}
    assert stats["calls"]["unreadable_profile_lines"] == 1  # the torn line
    assert stats["scores"]["recomputed"] == {"metric": "accuracy", "value": pytest.approx(32 / 101),
                                             "graded": 101, "ungraded": 0}
    assert stats["scores"]["suite"] == {"accuracy": 0.3}
    assert stats["calls"]["model_calls"] == 124


def test_writes_stats_json_and_histograms_for_every_metric(tmp_path: Path) -> None:
    run = _hle_like(tmp_path / "run")
    analysis = analyze_run(run, bins=5, plots=False)
    on_disk = json.loads((run / "analysis" / "stats.json").read_text())
    assert on_disk["by_role"] == json.loads(json.dumps(analysis.stats["by_role"]))
    hists = on_disk["histograms"]
    # orch-8b and qwen are each exactly one role's calls: no duplicate model histograms
    assert set(hists) == {"task_e2e", "role_answer", "role_orchestrator", "tool_search_e2e", "tool_search_expert",
                          "tool_answer_e2e", "tool_answer_expert", "tokens_prompt", "tokens_completion"}
    orch = hists["role_orchestrator"]
    assert orch["n"] == 101 and len(orch["linear"]["counts"]) == 5 and sum(orch["log"]["counts"]) == 101
    assert orch["linear"]["counts"] == [20, 20, 20, 20, 21]  # 0.1…2.0 | … | 8.1…10.1
    assert (run / "analysis" / "report.html").is_file()


def test_models_shared_by_roles_get_their_own_histogram(tmp_path: Path) -> None:
    events = [model_event(role, float(i), 1.0 + i, model="shared") for i, role in enumerate(["a", "b", "a"])]
    stats = analyze_run(write_run(tmp_path / "run", events=events), plots=False).stats
    assert {"role_a", "role_b", "model_shared"} <= set(stats["histograms"])


def test_chat_run_without_tool_events_or_types(tmp_path: Path) -> None:
    events = [model_event("m", i * 0.5, 1.0, typed=False) for i in range(10)]
    results = [{"id": i, "status": "ok", "answer": "x", "elapsed": 1.0} for i in range(10)]
    stats = analyze_run(write_run(tmp_path / "run", events=events, results=results), plots=False).stats
    assert stats["by_role"]["m"]["count"] == 10
    assert stats["by_tool"] == {"e2e": {}, "expert": {}} and stats["tool_parts"] == {}
    assert stats["scores"]["recomputed"]["metric"] == "success" and stats["scores"]["recomputed"]["value"] == 1.0
    # ten 1 s calls every 0.5 s: busy from t=0 to t=5.5
    assert stats["throughput"]["busy_s"] == pytest.approx(5.5)
    assert stats["throughput"]["calls_per_s"] == pytest.approx(10 / 5.5)


def test_busy_time_skips_the_gaps_of_a_resumed_run() -> None:
    assert busy_seconds([(0, 2), (1, 3), (10, 11), (10.5, 10.7)]) == 4.0
    assert busy_seconds([]) == 0.0


def test_timeline_in_flight_and_throughput(tmp_path: Path) -> None:
    # two calls of 10 s each, overlapping 5 s, one task each
    events = [model_event("m", 0.0, 10.0, task="a"), model_event("m", 5.0, 10.0, task="b")]
    line = timeline(read_profile(write_run(tmp_path / "run", events=events)))
    assert line is not None
    assert line["bucket_s"] == pytest.approx(1.0) and len(line["t"]) == 15
    assert line["calls_in_flight"] == pytest.approx([1.0] * 5 + [2.0] * 5 + [1.0] * 5)
    assert line["tasks_in_flight"] == pytest.approx(line["calls_in_flight"])
    assert sum(line["calls_per_s"]) * line["bucket_s"] == pytest.approx(2.0)
    assert line["t0"] == T0


def test_ops_analyze_cli_tables_and_json(tmp_path: Path) -> None:
    run = _hle_like(tmp_path / "run")
    shown = run_ops(["analyze", str(run), "--no-plots"])
    assert shown.returncode == 0, shown.stderr
    assert "model calls per role" in shown.stdout and "orchestrator" in shown.stdout and "task_timeout" in shown.stdout
    assert f"report: {run / 'analysis' / 'report.html'}" in shown.stderr
    as_json = run_ops(["analyze", str(run), "--json", "--no-plots", "--bins", "3"])
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["bins"] == 3 and data["by_role"]["orchestrator"]["count"] == 101
    assert len(data["histograms"]["task_e2e"]["linear"]["counts"]) == 3


def test_ops_analyze_bad_run_dir(tmp_path: Path) -> None:
    missing = run_ops(["analyze", str(tmp_path / "nope")])
    assert missing.returncode == 2 and f"{tmp_path / 'nope'}: no such run dir" in missing.stderr
    (tmp_path / "empty").mkdir()
    empty = run_ops(["analyze", str(tmp_path / "empty")])
    assert empty.returncode == 2 and "not a run dir" in empty.stderr and "Traceback" not in empty.stderr
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "results.jsonl").write_text("")
    (tmp_path / "bad" / "scores.json").write_text("{not json")
    bad = run_ops(["analyze", str(tmp_path / "bad")])
    assert bad.returncode == 2 and "scores.json: unreadable" in bad.stderr
