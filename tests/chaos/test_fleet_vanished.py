"""A fleet that vanishes under a running eval stops the run instead of failing it task after task.

Foreground: every replica SIGKILLed mid-run -> after `--fleet-wait` the eval exits 3 naming what is down,
records no failure, leaves `fleet_down.json` and a `fleet_vanished` event; the replicas back on their
ports, `--resume` finishes every id exactly once. Detached: `ops down` of the topology under the run ->
state `waiting` in `ops runs`, a `waiting_for_fleet` event, probes; `ops up` again -> the run resumes and
finishes. A fleet that never comes back -> `crashed` after `--max-restarts` probes, naming what is down;
`ops stop` while waiting -> stopped. Real sims, real `ops` subprocesses, a real `ops up`/`ops down`."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.chaos.supervise_fixtures import (
    detached_fixture,  # noqa: F401 (the `detached` fixture)
    events,
    run_info,
    runs_json,
    supervisor_state,
    wait_until,
)
from tests.helpers import OPS, REPO, kill_tree
from tests.integration.eval_fixtures import dataset, model_config, results
from tests.integration.test_fleet import Harness
from tests.simserver import SimServer

Detach = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path, "local")
    try:
        yield h
    finally:
        h.cleanup()


def _kill9(sim: SimServer) -> None:
    assert sim.process is not None
    sim.process.send_signal(signal.SIGKILL)
    sim.process.wait(timeout=30)


def _result_count(run_dir: Path) -> int:
    path = run_dir / "results.jsonl"
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_a_vanished_fleet_stops_the_run_with_exit_3_and_resume_finishes_it(
        tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    sims = [sim_server("m", args=["--latency-ms", "40"]) for _ in range(2)]
    config = model_config(tmp_path / "mc.json", {"m": sims})
    ids = [f"s{i}" for i in range(400)]
    data = dataset(tmp_path / "d.jsonl", ids)
    run_dir = tmp_path / "runs" / "vanish"
    args = ["eval", "chat", "--no-analyze", "--model-config", str(config), "--dataset", str(data), "--run-dir",
            str(run_dir), "--concurrency", "2", "--fleet-wait", "1", "--progress-every", "0.5"]
    proc = subprocess.Popen([*OPS, *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: _result_count(run_dir) >= 20, "20 results")
        for sim in sims:
            _kill9(sim)
        _out, err = proc.communicate(timeout=120)
    finally:
        kill_tree(proc.pid)
    assert proc.returncode == 3, err
    first = results(run_dir)
    assert 20 <= len(first) < 400 and all(r["status"] == "ok" for r in first)  # nothing recorded as failed
    addresses = [f"127.0.0.1:{s.port}" for s in sims]
    (line,) = [x for x in err.splitlines() if x.startswith("error: ")]
    assert line.startswith("error: the fleet vanished: all 2 replica(s) of 'm' are down after waiting 1 s (")
    assert all(a in line for a in addresses)
    assert "stay missing (not failed); bring the fleet back" in line and f"--resume (run dir {run_dir})" in line
    assert "no_replica" not in (run_dir / "eval.log").read_text()  # no task was written off as failed
    down = json.loads((run_dir / "fleet_down.json").read_text())
    assert down["models"] == ["m"] and down["reason"].startswith("all 2 replica(s) of 'm' are down")
    kinds = [e["event"] for e in events(run_dir)]
    assert kinds[-2:] == ["fleet_vanished", "stopped"] and set(kinds[:-2]) <= {"replica_ejected"}
    vanished, stopped = events(run_dir)[-2:]
    assert (vanished["model"], vanished["reason"]) == ("m", down["reason"])
    assert (stopped["done"], stopped["failed"], stopped["reason"]) == (len(first), 0, line.removeprefix("error: "))
    live = json.loads((run_dir / "live.json").read_text())
    assert (live["state"], live["reason"], live["supervised"]) == ("stopped", line.removeprefix("error: "), False)
    row = runs_json(tmp_path / "runs")["vanish"]
    assert (row["state"], row["done"], row["failed"], row["reason"]) == ("stopped", len(first), 0,
                                                                         live["reason"])

    for sim in sims:  # the fleet comes back where it was
        sim.start()
    resumed = subprocess.run([*OPS, *args, "--resume"], cwd=REPO, capture_output=True, text=True, timeout=300,
                             check=False)
    assert resumed.returncode == 0, resumed.stderr
    records = results(run_dir)
    assert Counter(r["id"] for r in records) == Counter(ids) and all(r["status"] == "ok" for r in records)


def test_ops_down_under_a_detached_run_waits_for_the_fleet_and_ops_up_resumes_it(
        harness: Harness, detached: Detach) -> None:
    topology = harness.topology("van", {"answer": {"replicas": 2, "sim": {"latency_ms": 40}}})
    assert harness.up(topology).returncode == 0
    ids = [f"s{i}" for i in range(400)]
    data = dataset(harness.cwd / "d.jsonl", ids)
    runs = harness.cwd / "runs"
    run_dir = runs / "van-run"
    started = detached(["eval", "chat", "--no-analyze", "--topology", str(topology), "--model", "answer",
                        "--dataset", str(data), "--concurrency", "2", "--fleet-wait", "1", "--progress-every", "0.5",
                        "--restart-backoff", "0.5", "--max-restarts", "20"], run_dir, harness.env)
    assert started.returncode == 0, started.stderr
    wait_until(lambda: _result_count(run_dir) >= 20, "20 results")
    assert harness.ops("down", "van").returncode == 0

    wait_until(lambda: supervisor_state(run_dir) == "waiting", "the supervisor waits for the fleet")
    row = runs_json(runs)["van-run"]
    assert row["state"] == "waiting" and row["reason"].startswith("waiting for the fleet")
    before = results(run_dir)
    assert all(r["status"] == "ok" for r in before)  # nothing recorded as failed
    wait_until(lambda: "[SUPERVISOR] probe 1 of 20: still down: " in (run_dir / "eval.log").read_text(),
               "a probe that found the fleet down")
    assert harness.up(topology).returncode == 0

    wait_until(lambda: supervisor_state(run_dir) in ("finished", "crashed"), "the run ended", timeout_s=300)
    info = run_info(run_dir)
    assert info["supervisor"]["state"] == "finished", info["supervisor"]
    records = results(run_dir)
    assert Counter(r["id"] for r in records) == Counter(ids) and all(r["status"] == "ok" for r in records)
    one, two = info["attempts"]
    assert (one["exit"], one["outcome"]) == (3, "wait") and one["reason"].startswith("the fleet is down (exit 3)")
    assert (two["resume"], two["exit"], two["outcome"]) == (True, 0, "finished")
    assert info["supervisor"]["restarts"] == 0  # attempt 1 made progress: the resume is no restart
    kinds = [e["event"] for e in events(run_dir) if e["event"] != "replica_ejected"]
    assert kinds == ["fleet_vanished", "waiting_for_fleet", "restart", "finished"]
    waiting = next(e for e in events(run_dir) if e["event"] == "waiting_for_fleet")
    assert waiting["models"] == ["answer"] and "all 2 replica(s) of 'answer' are down" in waiting["reason"]
    log = (run_dir / "eval.log").read_text()
    assert "[SUPERVISOR] attempt 1: the fleet is down (answer): all 2 replica(s) of 'answer' are down" in log
    # the supervisor probes on its own clock: it may find the fleet back while `ops up` has one replica of 2 ready
    assert re.search(r"^\[SUPERVISOR\] the fleet answers again \(answer: [12] of 2 replica\(s\) answer\); "
                     r"resuming with --resume$", log, re.MULTILINE), log
    assert runs_json(runs)["van-run"]["state"] == "finished"


def _detached_over_one_sim(tmp_path: Path, sim: SimServer, detached: Detach, name: str,
                           *extra: str) -> Path:
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    data = dataset(tmp_path / "d.jsonl", [f"s{i}" for i in range(2000)])
    run_dir = tmp_path / "runs" / name
    started = detached(["eval", "chat", "--no-analyze", "--model-config", str(config), "--dataset", str(data),
                        "--concurrency", "2", "--fleet-wait", "1", *extra], run_dir)
    assert started.returncode == 0, started.stderr
    wait_until(lambda: _result_count(run_dir) >= 10, "10 results")
    _kill9(sim)
    return run_dir


def test_a_fleet_that_never_comes_back_ends_the_run_as_crashed_after_the_bound(
        tmp_path: Path, sim_server: Callable[..., SimServer], detached: Detach) -> None:
    sim = sim_server("m", args=["--latency-ms", "40"])
    run_dir = _detached_over_one_sim(tmp_path, sim, detached, "never", "--max-restarts", "2",
                                     "--restart-backoff", "0.2")
    wait_until(lambda: supervisor_state(run_dir) == "crashed", "crashed")
    info = run_info(run_dir)
    reason = info["supervisor"]["reason"]
    assert reason.startswith("the fleet did not come back: 2 probe(s) over 0.6 s (--max-restarts 2); still down: m: "
                             f"127.0.0.1:{sim.port} connection refused")
    assert [a["outcome"] for a in info["attempts"]] == ["wait"]
    assert [e["event"] for e in events(run_dir) if e["event"] != "replica_ejected"] == [
        "fleet_vanished", "waiting_for_fleet", "crashed"]
    assert all(r["status"] == "ok" for r in results(run_dir))
    row = runs_json(tmp_path / "runs")["never"]
    assert (row["state"], row["reason"], row["attempts"]) == ("crashed", reason, 1)


def test_ops_stop_while_waiting_for_the_fleet_stops_the_run(
        tmp_path: Path, sim_server: Callable[..., SimServer], detached: Detach) -> None:
    sim = sim_server("m", args=["--latency-ms", "40"])
    run_dir = _detached_over_one_sim(tmp_path, sim, detached, "stop-waiting", "--restart-backoff", "60")
    wait_until(lambda: supervisor_state(run_dir) == "waiting", "waiting")
    stopped = subprocess.run([*OPS, "stop", str(run_dir)], cwd=REPO, capture_output=True, text=True, timeout=120,
                             check=False)
    assert stopped.returncode == 0, stopped.stderr
    assert f"{run_dir}: stopped (" in stopped.stdout
    info = run_info(run_dir)
    assert (info["supervisor"]["state"], info["supervisor"]["reason"]) == (
        "stopped", "stopped by the user while waiting for the fleet")
    assert [e["event"] for e in events(run_dir) if e["event"] != "replica_ejected"] == [
        "fleet_vanished", "waiting_for_fleet", "stopped"]
    assert all(r["status"] == "ok" for r in results(run_dir))
