"""Repairing a fleet that is up, on real simulated replicas (local children, and tmux on a private
socket): kill -9 one replica, `ops up` again restarts only it (the others keep their pids, the
endpoints file stays the same); `ops restart NAME` replaces one process; a replica started by hand
on a dead replica's port shows as EXTERNAL and is left alone. Everything started is stopped by pid."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from orchestra_ops.core import procs
from tests.integration.test_fleet import BACKENDS, Harness
from tests.simserver import SimServer


@pytest.fixture(params=BACKENDS)
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path, request.param)
    try:
        yield h
    finally:
        h.cleanup()


def _pids(harness: Harness, name: str) -> dict[str, int]:
    return {p["name"]: p["pid"] for p in harness.state(name)["processes"]}


def _kill9(pid: int) -> None:
    """SIGKILL, then wait until it is dead as ops sees it: gone, or a zombie its parent (the tmux
    server, for a tmux pane) has not reaped yet. psutil's wait() on a non-child waits for the reaping,
    which a loaded tmux server may do seconds later (this test was flaky on exactly that)."""
    create_time = psutil.Process(pid).create_time()
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while procs.is_alive(pid, create_time):
        assert time.monotonic() < deadline, f"pid {pid} still alive 30 s after SIGKILL"
        time.sleep(0.05)


def _health(harness: Harness) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(harness.ops("health", "--json").stdout)
    return {p["name"]: p["state"] for p in report["processes"]}


def _endpoints(harness: Harness, name: str) -> Any:
    return json.loads((harness.home / name / "model_config.json").read_text())


def test_up_restarts_only_the_dead_and_restart_replaces_one(harness: Harness) -> None:
    topo = harness.topology("fix", {"alpha": {}, "beta": {}})
    assert harness.up(topo).returncode == 0
    before, endpoints = _pids(harness, "fix"), _endpoints(harness, "fix")
    _kill9(before["alpha/1"])
    assert _health(harness)["alpha/1"] == "DEAD"

    again = harness.up(topo)
    assert again.returncode == 0, again.stderr
    assert "fix: restarted alpha/1 (ready in" in again.stderr and "3 kept running" in again.stderr
    after = _pids(harness, "fix")
    assert {n: p for n, p in after.items() if n != "alpha/1"} == {n: p for n, p in before.items() if n != "alpha/1"}
    assert after["alpha/1"] != before["alpha/1"] and psutil.pid_exists(after["alpha/1"])
    assert _endpoints(harness, "fix") == endpoints
    assert _health(harness) == {"alpha/0": "READY", "alpha/1": "READY", "beta/0": "READY", "beta/1": "READY"}
    if harness.backend == "tmux":
        assert harness.has_tmux_session("fix")

    restarted = harness.ops("restart", "beta-0")
    assert restarted.returncode == 0, restarted.stderr
    third = _pids(harness, "fix")
    assert f"fix: restarted beta/0 as pid {third['beta/0']}, ready in" in restarted.stderr
    assert third["beta/0"] != after["beta/0"] and not psutil.pid_exists(after["beta/0"])
    assert {n: p for n, p in third.items() if n != "beta/0"} == {n: p for n, p in after.items() if n != "beta/0"}
    assert restarted.stdout.strip() == str(harness.home / "fix" / "model_config.json")
    assert _endpoints(harness, "fix") == endpoints
    assert set(_health(harness).values()) == {"READY"}

    unknown = harness.ops("restart", "gamma/0")
    assert unknown.returncode == 2 and "has no process 'gamma/0'" in unknown.stderr
    assert "Traceback" not in unknown.stderr


def test_a_replica_started_by_hand_is_external_and_left_alone(tmp_path: Path) -> None:
    harness = Harness(tmp_path, "local")
    try:
        topo = harness.topology("ext", {"alpha": {}})
        assert harness.up(topo).returncode == 0
        before = _pids(harness, "ext")
        port = harness.state("ext")["processes"][1]["port"]
        _kill9(before["alpha/1"])
        by_hand = SimServer("sim/alpha", port=port, args=["--latency-ms", "1"], log_dir=tmp_path)
        try:
            by_hand.start()
            health = json.loads(harness.ops("health", "--json").stdout)["processes"]
            assert [(p["name"], p["state"]) for p in health] == [("alpha/0", "READY"), ("alpha/1", "EXTERNAL")]
            assert "a process ops did not start" in health[1]["detail"]

            again = harness.up(topo)  # nothing is dead: the fleet is up, the hand-started one untouched
            assert again.returncode == 3 and "already up" in again.stderr
            assert _pids(harness, "ext") == before and by_hand.process is not None and by_hand.process.poll() is None

            taken = harness.ops("restart", "alpha/1")  # its port is someone else's: refused, named
            assert taken.returncode == 3, taken.stderr
            assert f"error: cannot restart alpha/1: port {port} is held by pid {by_hand.pid} (python), not a " \
                "process ops started" in taken.stderr
            assert by_hand.process.poll() is None
        finally:
            by_hand.stop()
        assert _health(harness)["alpha/1"] == "DEAD"
        assert harness.up(topo).returncode == 0
        assert set(_health(harness).values()) == {"READY"}
    finally:
        harness.cleanup()
