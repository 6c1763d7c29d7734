"""Crash safety and resume: kill -9 then --resume, --retry-failed, Ctrl-C, eval-status, bad input."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from tests.helpers import OPS, REPO, kill_tree, run_ops
from tests.integration.eval_fixtures import dataset, kill9_mid_run, model_config, results, total
from tests.simserver import SimServer


def _start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen([*OPS, *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_kill_9_then_resume_then_retry_failed(tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("m", args=["--latency-ms", "20", "--fail", "500:0.15", "--seed", "11"])
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    ids = [f"s{i}" for i in range(400)]
    data = dataset(tmp_path / "d.jsonl", ids)
    run_dir = tmp_path / "run"
    base = ["eval", "chat", "--no-analyze",
            "--model-config", str(config), "--run-dir", str(run_dir), "--concurrency", "16",
            "--max-retries", "1"]
    kill9_mid_run([*base, "--dataset", str(data)], run_dir / "results.jsonl", 100, timeout_s=60)
    before = results(run_dir)
    assert 100 <= len(before) < 400

    status = run_ops(["eval-status", str(run_dir), "--json", "--missing-out", str(tmp_path / "missing.jsonl")])
    assert status.returncode == 0, status.stderr
    info = json.loads(status.stdout)
    assert info["missing"] == 400 - len(before) and info["ok"] + info["failed"] == len(before)
    missing = [json.loads(line)["id"] for line in (tmp_path / "missing.jsonl").read_text().splitlines()]
    assert set(missing) == set(ids) - {r["id"] for r in before}

    resumed = run_ops([*base, "--resume"])  # the run dir remembers the dataset
    assert resumed.returncode == 0, resumed.stderr
    after = results(run_dir)
    assert Counter(r["id"] for r in after) == Counter(ids)  # every id exactly once, every line parsed
    assert after[: len(before)] == before
    failed = {r["id"] for r in after if r["status"] == "error"}
    assert failed and all(r["error_type"] == "http_500" for r in after if r["status"] == "error")

    status = json.loads(run_ops(["eval-status", str(run_dir), "--json"]).stdout)
    assert status == {**status, "ok": 400 - len(failed), "failed": len(failed), "missing": 0,
                      "failed_by_type": {"http_500": len(failed)}}

    retried = run_ops([*base, "--retry-failed", "--progress-every", "0.1"])
    assert retried.returncode == 0, retried.stderr
    rerun = results(run_dir)[len(after):]
    assert sorted(r["id"] for r in rerun) == sorted(failed)  # exactly the failed ids, once each
    assert f"{len(failed)} to run" in retried.stdout


def test_ctrl_c_finishes_in_flight_tasks_and_exits_130(tmp_path: Path,
                                                       sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("m", args=["--latency-ms", "200"])
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    data = dataset(tmp_path / "d.jsonl", range(100))
    run_dir = tmp_path / "run"
    base = ["eval", "chat", "--no-analyze",
            "--model-config", str(config), "--run-dir", str(run_dir), "--concurrency", "8"]
    proc = _start([*base, "--dataset", str(data)])
    try:
        deadline = time.monotonic() + 60
        while total([sim], "sim_requests_total") < 12 and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        kill_tree(proc.pid)
    assert proc.returncode == 130, err
    assert "stopping: no new tasks" in out
    assert "continue with --resume" in err
    done = results(run_dir)
    assert len(done) == total([sim], "sim_requests_total")  # every request that started finished and was kept
    assert all(r["status"] == "ok" for r in done)
    log = (run_dir / "eval.log").read_text()
    assert "stopping: no new tasks" in log and "error: interrupted after" in log
    resumed = run_ops([*base, "--resume"])
    assert resumed.returncode == 0, resumed.stderr
    assert sorted(r["id"] for r in results(run_dir)) == list(range(100))


def test_duplicate_ids_exit_2_naming_them(tmp_path: Path) -> None:
    config = tmp_path / "mc.json"
    config.write_text(json.dumps({"m": [{"ip_addr": "127.0.0.1", "port": 9}]}))
    data = dataset(tmp_path / "d.jsonl", ["a", "b", "a", "c", "c", "c"])
    proc = run_ops(["eval", "chat", "--no-analyze", "--dataset", str(data), "--model-config", str(config), "--run-dir",
                    str(tmp_path / "run")])
    assert proc.returncode == 2
    assert "2 duplicate id(s): 'a' (x2), 'c' (x3)" in proc.stderr and "--dedupe" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_a_concurrency_the_open_file_limit_cannot_carry_is_refused_before_any_request(
        tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("m", args=["--latency-ms", "5"])
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    data = dataset(tmp_path / "d.jsonl", range(20))

    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200))

    proc = subprocess.run([*OPS, "eval", "chat", "--no-analyze", "--dataset", str(data), "--model-config", str(config),
                           "--run-dir", str(tmp_path / "run"), "--concurrency", "500"],
                          cwd=REPO, capture_output=True, text=True, timeout=60, preexec_fn=low_limit, check=False)
    assert proc.returncode == 2, proc.stderr
    assert ("--concurrency 500 needs about 565 open files (500 connections + 1 replica probes + 64 for logs "
            "and the runtime), but this process may open only 200 (hard limit 200)") in proc.stderr
    assert "use --concurrency 135 or less" in proc.stderr
    assert total([sim], "sim_requests_total") == 0


def test_a_second_ctrl_c_aborts_tasks_that_would_not_finish(tmp_path: Path,
                                                           sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("m", args=["--hang-rate", "1"])
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    data = dataset(tmp_path / "d.jsonl", range(10))
    run_dir = tmp_path / "run"
    proc = _start(["eval", "chat", "--no-analyze", "--dataset", str(data), "--model-config", str(config), "--run-dir",
                   str(run_dir), "--concurrency", "4"])
    try:
        deadline = time.monotonic() + 60
        while total([sim], "sim_requests_total") < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        while "stopping" not in (run_dir / "eval.log").read_text() and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        kill_tree(proc.pid)
    assert proc.returncode == 130, err
    assert "aborting 4 task(s) in flight" in out
    assert not (run_dir / "results.jsonl").exists() or results(run_dir) == []
    status = json.loads(run_ops(["eval-status", str(run_dir), "--json"]).stdout)
    assert status["missing"] == 10
