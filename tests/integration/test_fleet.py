"""`ops up` / `health` / `status` / `logs` / `down` as a user runs them: real `ops` subprocesses,
real simulated engines, real tmux on a private socket. Everything started is stopped by pid."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from orchestra_ops.core.procs import listeners
from tests.helpers import free_port_block, kill_tree, run_ops, still_ours

BACKENDS = ["local", "tmux"]


class Harness:
    """One OPS_HOME and one private tmux socket per test; `cleanup` stops whatever is left."""

    def __init__(self, tmp_path: Path, backend: str) -> None:
        self.cwd = tmp_path
        self.home = tmp_path / "ops-home"
        self.backend = backend
        self.socket = f"ops-test-{uuid.uuid4().hex[:10]}"
        self.env = {"OPS_HOME": str(self.home)}

    def topology(self, name: str, models: dict[str, dict[str, Any]], **defaults: Any) -> Path:
        body: dict[str, Any] = {
            "name": name, "backend": self.backend,
            "defaults": {"ulimit_nofile": 4096, "ready_timeout_s": 120, **defaults},
            "nodes": {"cpu": {"host": "localhost", "gpus": 0}}, "models": {},
        }
        for key, extra in models.items():
            replicas = extra.pop("replicas", 2)
            body["models"][key] = {"model": f"sim/{key}", "engine": "sim", "node": "cpu", "replicas": replicas,
                                   "gpus_per_replica": 0, "port": free_port_block(replicas),
                                   "sim": {"latency_ms": 1}, **extra}
        path = self.cwd / f"{name}.yaml"
        path.write_text(yaml.safe_dump(body))
        return path

    def ops(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return run_ops(list(args), env=self.env, cwd=self.cwd, timeout=timeout)

    def up(self, topology: Path, *extra: str) -> subprocess.CompletedProcess[str]:
        args = ["up", str(topology), "--backend", self.backend, *extra]
        if self.backend == "tmux":
            args += ["--tmux-socket", self.socket]
        return self.ops(*args)

    def state(self, name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.home / name / "state.json").read_text())
        return data

    def has_tmux_session(self, name: str, node: str = "cpu") -> bool:
        result = subprocess.run(["tmux", "-L", self.socket, "has-session", "-t", f"=ops-{name}-{node}"],
                                capture_output=True, check=False)
        return result.returncode == 0

    def cleanup(self) -> None:
        for state_file in self.home.glob("*/state.json") if self.home.is_dir() else []:
            self.ops("down", state_file.parent.name, "--timeout", "5")
            for record in json.loads(state_file.read_text()).get("processes", []):
                if still_ours(record):
                    kill_tree(record["pid"])
        # the private server only (never the default socket); fails harmlessly when it is gone
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, check=False)
        tmux_dir = Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}"
        (tmux_dir / self.socket).unlink(missing_ok=True)


def _family(records: list[dict[str, Any]]) -> list[psutil.Process]:
    """Every recorded process that is still ours, with all its descendants."""
    found = []
    for record in records:
        if still_ours(record):
            proc = psutil.Process(record["pid"])
            found += [proc, *proc.children(recursive=True)]
    return found


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture(params=BACKENDS)
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path, request.param)
    try:
        yield h
    finally:
        h.cleanup()


@pytest.fixture
def local_harness(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path, "local")
    try:
        yield h
    finally:
        h.cleanup()


def test_up_health_kill_down(harness: Harness) -> None:
    topo = harness.topology("two", {"alpha": {}, "beta": {}})
    result = harness.up(topo)
    assert result.returncode == 0, result.stderr
    endpoints_file = harness.home / "two" / "model_config.json"
    assert result.stdout.strip() == str(endpoints_file)
    endpoints = json.loads(endpoints_file.read_text())
    assert set(endpoints) == {"sim/alpha", "sim/beta"}
    ports = [entry["port"] for entries in endpoints.values() for entry in entries]
    assert len(ports) == 4 and all(isinstance(port, int) for port in ports)

    health = harness.ops("health", "--json")
    assert health.returncode == 0, health.stderr
    report = json.loads(health.stdout)
    assert report["topology"] == "two"
    assert [p["state"] for p in report["processes"]] == ["READY"] * 4
    assert {p["model"] for p in report["processes"]} == {"sim/alpha", "sim/beta"}
    assert all(p["running"] is not None and p["kv_cache"] is not None for p in report["processes"])

    status = json.loads(harness.ops("status", "--json").stdout)
    assert [p["alive"] for p in status["processes"]] == [True] * 4
    assert set(status["processes"][0]) == {"name", "node", "backend", "pid", "alive", "state", "uptime_s", "host",
                                           "port", "log"}
    assert {(p["node"], p["backend"], p["state"]) for p in status["processes"]} == {("cpu", harness.backend,
                                                                                   "running")}
    logs = harness.ops("logs", "alpha/0", "-n", "5")
    assert logs.returncode == 0 and logs.stdout.strip()

    pids = [p["pid"] for p in harness.state("two")["processes"]]
    again = harness.up(topo)  # up and serving as the file says: nothing starts, exit 0 (`ops up X && ops eval …`)
    assert again.returncode == 0, again.stderr
    assert again.stderr.splitlines()[-1] == "two: already up, 4/4 ready"
    assert [p["pid"] for p in harness.state("two")["processes"]] == pids

    state = harness.state("two")
    assert state["status"] == "up" and state["topology_file"] == str(topo)
    if harness.backend == "tmux":
        assert harness.has_tmux_session("two")
    family = _family(state["processes"])
    assert len(family) >= 4
    victim = state["processes"][1]
    os.kill(victim["pid"], signal.SIGKILL)
    psutil.wait_procs([p for p in family if p.pid == victim["pid"]], timeout=10)

    health = harness.ops("health", "--json")
    assert health.returncode != 0
    states = {p["name"]: p["state"] for p in json.loads(health.stdout)["processes"]}
    assert states.pop(victim["name"]) == "DEAD"
    assert set(states.values()) == {"READY"}

    down = harness.ops("down")
    assert down.returncode == 0, down.stderr
    assert "1 already gone" in down.stderr
    assert [p.pid for p in family if _alive(p)] == []
    assert listeners(ports) == {}
    assert not harness.has_tmux_session("two")
    assert harness.state("two")["status"] == "down"

    twice = harness.ops("down")
    assert twice.returncode == 0 and "nothing is up" in twice.stderr
    assert harness.ops("health").returncode != 0  # nothing is up any more


def test_crash_during_startup_fails_fast(harness: Harness) -> None:
    topo = harness.topology("crashy", {"good": {}, "bad": {"replicas": 1, "engine_args": ["--no-such-flag"]}})
    result = harness.up(topo, "--timeout", "300")
    assert result.returncode == 3
    assert "bad/0 exited" in result.stderr  # it died; we did not wait for the timeout
    assert "No such option" in result.stderr  # the log tail
    assert "reproduce:" in result.stderr and "--no-such-flag" in result.stderr
    state = harness.state("crashy")
    assert state["status"] == "down"
    assert [p.pid for p in _family(state["processes"]) if _alive(p)] == []
    assert not harness.has_tmux_session("crashy")


FAKE_SERVER = textwrap.dedent("""
    import os, signal, sys, time
    mode = os.environ["FAKE_MODE"]
    for i in range(200):
        print(f"loading shard {i}")  # no flush: the backend must keep it anyway
    if mode == "die":
        print("LAST WORDS before SIGKILL")
        os.kill(os.getpid(), signal.SIGKILL)
    print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    time.sleep(600)
""")


def _fake_topology(harness: Harness, mode: str) -> Path:
    script = harness.cwd / "fake_server.py"
    script.write_text(FAKE_SERVER)
    return harness.topology("fake", {"m": {"replicas": 1, "env": {"FAKE_MODE": mode}}},
                            ops_command=[sys.executable, str(script)])


def test_line_printed_just_before_kill_is_in_the_log(harness: Harness) -> None:
    result = harness.up(_fake_topology(harness, "die"), "--timeout", "300")
    assert result.returncode == 3 and "m/0 exited" in result.stderr
    assert "LAST WORDS before SIGKILL" in result.stderr
    log = Path(harness.state("fake")["processes"][0]["log"]).read_text()
    lines = log.splitlines()
    assert lines[-1] == "LAST WORDS before SIGKILL"
    assert sum(line.startswith("loading shard") for line in lines) == 200


def test_fatal_log_line_fails_fast_and_stops_the_process(local_harness: Harness) -> None:
    result = local_harness.up(_fake_topology(local_harness, "oom"), "--timeout", "300")
    assert result.returncode == 3
    assert "logged a fatal line: torch.OutOfMemoryError: CUDA out of memory" in result.stderr
    record = local_harness.state("fake")["processes"][0]
    assert not still_ours(record)


def test_port_in_use_is_refused_before_launching(local_harness: Harness) -> None:
    topo = local_harness.topology("busy", {"alpha": {}})
    port = yaml.safe_load(topo.read_text())["models"]["alpha"]["port"] + 1
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        result = local_harness.up(topo)
    assert result.returncode == 3
    assert f"alpha/1: port {port} is held by pid {os.getpid()}" in result.stderr
    assert not (local_harness.home / "busy" / "state.json").exists()
    assert not (local_harness.home / "busy" / "logs").exists()


def test_down_after_up_was_killed_mid_wait(harness: Harness) -> None:
    topo = harness.topology("crashed", {"slow": {"sim": {"latency_ms": 1, "startup_delay_s": 600}}})
    args = [sys.executable, "-m", "orchestra_ops", "up", str(topo), "--backend", harness.backend]
    if harness.backend == "tmux":
        args += ["--tmux-socket", harness.socket]
    cli = subprocess.Popen(args, cwd=harness.cwd, env={**os.environ, **harness.env},
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert cli.stderr is not None
        for line in cli.stderr:  # progress lines start once the state is written and waiting began
            if "ready" in line:
                break
    finally:
        cli.kill()
        cli.wait(timeout=30)
    state = harness.state("crashed")
    assert state["status"] == "up"
    family = _family(state["processes"])
    assert len(family) >= 2
    down = harness.ops("down")
    assert down.returncode == 0, down.stderr
    assert "2 stopped" in down.stderr
    assert [p.pid for p in family if _alive(p)] == []
    assert not harness.has_tmux_session("crashed")
