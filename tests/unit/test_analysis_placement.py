"""`ops analyze`'s placement per model: calls per replica, session moves, the replicas' own hit rate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestra_ops.analysis.analyze import compute
from orchestra_ops.analysis.placement import placement, placement_lines
from orchestra_ops.analysis.rundata import load_run
from orchestra_ops.runner.profile_reader import read_profile
from tests.helpers import run_ops

A, B, C = "127.0.0.1:9000", "127.0.0.1:9001", "127.0.0.1:9002"


def call(replica: str, start: float, status: str = "ok", model: str = "orch") -> dict[str, Any]:
    return {"type": "model_call", "task": "t", "role": "orchestrator", "model": model, "replica": replica,
            "start": start, "latency": 0.5, "prompt_tokens": 10, "completion_tokens": 2, "attempts": 1,
            "status": status}


def reading(phase: str, replica: str, time: float, hits: float, queries: float, requests: float,
            created: float = 100.0) -> dict[str, Any]:
    return {"type": "replica_counters", "phase": phase, "model": "orch", "replica": replica, "time": time,
            "hits": hits, "queries": queries, "requests": requests, "created": created}


def write_profile(run_dir: Path, events: list[dict[str, Any]]) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "profile.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (run_dir / "results.jsonl").write_text(json.dumps({"id": "t", "status": "ok", "elapsed": 1.0}) + "\n")
    return run_dir


def test_calls_moves_and_the_hit_rate_of_two_runs_on_one_run_dir(tmp_path: Path) -> None:
    events = [
        reading("start", A, 1000, 100, 1000, 50), reading("start", B, 1000, 0, 0, 0),
        reading("start", C, 1000, 5, 5, 1),
        *[call(A, 1001 + i) for i in range(6)], *[call(B, 1001 + i) for i in range(3)], call(B, 1010, "timeout"),
        {"type": "session_move", "model": "orch", "session": "t1", "from": C, "to": B, "reason": "ejected",
         "time": 1002},
        {"type": "session_move", "model": "orch", "session": "t2", "from": A, "to": B, "reason": "over_bound",
         "time": 1003},
        {"type": "session_move", "model": "orch", "session": "t3", "from": A, "to": C, "reason": "over_bound",
         "time": 1004},
        reading("end", A, 1100, 900, 2000, 56),  # +800 / +1000, 6 requests = its 6 answered calls
        reading("end", B, 1100, 64, 1128, 7),  # 3 answered, 7 finished: 4 from someone else
        reading("end", C, 1100, 128, 512, 2, created=1050.0),  # restarted: counts from its restart
        # a resumed run: another pair
        reading("start", A, 2000, 900, 2000, 56), call(A, 2001), reading("end", A, 2100, 1000, 2100, 57),
        reading("start", B, 2000, 64, 1128, 7),  # this one never got its end reading
    ]
    profile = read_profile(write_profile(tmp_path / "run", events))
    row = placement(profile)["orch"]
    assert row["replicas"] == 3
    assert row["calls"] == {"per_replica": {A: 7, B: 4}, "max": 7, "mean": 11 / 3, "max_over_mean": 7 / (11 / 3)}
    assert row["moves"] == {"total": 3, "by_reason": {"ejected": 1, "over_bound": 2}}
    cache = row["prefix_cache"]
    assert (cache["hits"], cache["queries"], cache["windows"]) == (800 + 64 + 128 + 100, 1000 + 1128 + 512 + 100, 4)
    assert cache["hit_rate"] == 1092 / 2740
    assert cache["notes"] == [
        f"{B}: finished 4 request(s) more than the run's 3 answered call(s) to it: traffic from other clients "
        "(another run, ops health) or calls of this run that timed out; their tokens are in its counts",
        f"{C}: restarted during the run; only what it counted after its restart is in",
        f"{B}: no end reading (the run stopped before it); that run's counts are left out",
    ]


def test_a_run_without_counter_readings_still_gets_calls_per_replica(tmp_path: Path) -> None:
    run_dir = write_profile(tmp_path / "run", [call(A, 1), call(A, 2), call(B, 3), {**call(A, 4), "cache": "hit"}])
    stats, _ = compute(load_run(run_dir))
    assert stats["placement"] == {"orch": {
        "replicas": 2, "calls": {"per_replica": {A: 2, B: 1}, "max": 2, "mean": 1.5, "max_over_mean": 2 / 1.5},
        "moves": {"total": 0, "by_reason": {}}, "prefix_cache": None}}
    out = run_ops(["analyze", str(run_dir), "--no-plots"])
    assert out.returncode == 0, out.stderr
    assert "placement" in out.stdout and "1.33" in out.stdout


def test_the_end_of_a_run_says_what_the_counters_say(tmp_path: Path) -> None:
    events = [reading("start", A, 10, 0, 0, 0), call(A, 11), reading("end", A, 12, 256, 1024, 3)]
    rows = placement(read_profile(write_profile(tmp_path / "run", events)))
    assert placement_lines(rows) == [
        "orch: prefix cache hit 25.0% of 1024 prompt tokens (the replicas' own counters); calls per replica "
        "max/mean 1.00 over 1; 0 session move(s)",
        f"  note: orch: {A}: finished 2 request(s) more than the run's 1 answered call(s) to it: traffic from other "
        "clients (another run, ops health) or calls of this run that timed out; their tokens are in its counts"]
