"""Faults from real sim replicas: 500s and 429s retried, 400s not, hangs time out, long prompts refused."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.helpers import model_calls, run_ops
from tests.integration.eval_fixtures import dataset, model_config, results, total
from tests.simserver import SimServer


def _eval(tmp_path: Path, sims: list[SimServer], n: int, *extra: str) -> tuple[Path, list[dict]]:
    config = model_config(tmp_path / "mc.json", {"m": sims})
    data = dataset(tmp_path / "d.jsonl", range(n))
    run_dir = tmp_path / "run"
    proc = run_ops(["eval", "chat", "--no-analyze", "--dataset", str(data), "--model-config", str(config), "--run-dir",
                    str(run_dir), *extra])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    records = results(run_dir)
    assert sorted(r["id"] for r in records) == list(range(n))  # every task recorded exactly once
    return run_dir, records


def test_500s_and_429s_are_retried(tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("m", args=["--latency-ms", "5", "--fail", "500:0.1,429:0.05", "--retry-after-s", "0.05",
                                "--seed", "7"])
    run_dir, records = _eval(tmp_path, [sim], 60, "--concurrency", "8", "--max-retries", "8")
    assert all(r["status"] == "ok" for r in records)
    metrics = sim.metrics()
    assert metrics['sim_requests_failed_total{status="500"}'] > 0
    assert metrics['sim_requests_failed_total{status="429"}'] > 0
    failures = metrics['sim_requests_failed_total{status="500"}'] + metrics['sim_requests_failed_total{status="429"}']
    assert sum(r["attempts"] for r in records) == 60 + failures
    events = model_calls(run_dir)
    assert sum(e["attempts"] for e in events) == 60 + failures


def test_a_400_is_recorded_not_retried(tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("m", args=["--latency-ms", "5", "--fail", "400:0.3", "--seed", "3"])
    _, records = _eval(tmp_path, [sim], 40, "--concurrency", "4")
    errors = [r for r in records if r["status"] == "error"]
    assert errors and all(r["error_type"] == "http_400" and "answered 400" in r["error"] for r in errors)
    assert len(errors) == sim.metrics()['sim_requests_failed_total{status="400"}']
    assert sim.metrics()["sim_requests_total"] == 40  # one request per task: no retry of a 400


def test_a_hanging_request_times_out_and_is_recorded(tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("m", args=["--latency-ms", "5", "--hang-rate", "0.25", "--seed", "5"])
    _, records = _eval(tmp_path, [sim], 24, "--concurrency", "8", "--timeout", "0.5", "--max-retries", "1")
    timeouts = [r for r in records if r["status"] == "error"]
    assert timeouts and all(r["error_type"] == "timeout" for r in timeouts)
    assert len(timeouts) == sim.metrics()["sim_requests_hung_total"]


def test_a_task_deadline_is_recorded(tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("m", args=["--latency-ms", "5", "--hang-rate", "1"])
    _, records = _eval(tmp_path, [sim], 3, "--timeout", "30", "--task-timeout", "0.3")
    assert all(r["status"] == "error" and r["error_type"] == "task_timeout" for r in records)


def test_a_prompt_over_max_model_len_is_refused_before_sending(tmp_path: Path,
                                                               sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("m", args=["--latency-ms", "5", "--max-model-len", "64"])
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "long", "prompt": "word " * 100}) + "\n"
                    + json.dumps({"id": "short", "prompt": [{"role": "user", "content": "hi"}]}) + "\n")
    proc = run_ops(["eval", "chat", "--no-analyze", "--dataset", str(data), "--model-config", str(config), "--run-dir",
                    str(tmp_path / "run")])
    assert proc.returncode == 0, proc.stderr
    by_id = {r["id"]: r for r in results(tmp_path / "run")}
    assert by_id["short"]["status"] == "ok"
    assert by_id["long"]["error_type"] == "prompt_too_long"
    assert "about 129 tokens, 66 over what 'm' can take (max_model_len 64" in by_id["long"]["error"]
    assert total([sim], "sim_requests_total") == 1
