"""A fleet brought up by the previous version (state.json version 1) can still be seen and stopped."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.helpers import free_port, kill_tree, run_ops

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def _v1_record(name: str, pid: int, log: Path, window: str | None = None) -> dict[str, Any]:
    """A process record exactly as version 1 wrote it."""
    return {"name": name, "group": name.split("/")[0], "kind": "sim", "pid": pid, "pgid": pid, "sid": pid,
            "create_time": psutil.Process(pid).create_time(), "host": "127.0.0.1", "port": free_port(),
            "log": str(log), "argv": SLEEPER, "env": {"PYTHONUNBUFFERED": "1"}, "served_model_name": "sim/m",
            "endpoint_key": "sim/m", "log_offset": 0, "tmux_window": window}


def _v1_state(name: str, backend: str, records: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"name": name, "topology_file": f"/old/{name}.yaml", "backend": backend, "status": "up",
            "started_at": 1.0, "cwd": "/old", "processes": records, "ready_at": 2.0, "stopped_at": None,
            "tmux_socket": None, "tmux_session": None, "provider_key_envs": [], "endpoints_file": None,
            "version": 1, **extra}


@pytest.fixture
def children() -> Iterator[list[int]]:
    pids: list[int] = []
    yield pids
    for pid in pids:
        kill_tree(pid)


def test_down_stops_a_local_fleet_recorded_by_version_1(tmp_path: Path, children: list[int]) -> None:
    home = tmp_path / "home"
    procs = [subprocess.Popen(SLEEPER, start_new_session=True) for _ in range(2)]
    children.extend(p.pid for p in procs)
    records = [_v1_record(f"m/{i}", p.pid, tmp_path / f"m-{i}.log") for i, p in enumerate(procs)]
    (home / "old").mkdir(parents=True)
    (home / "old" / "state.json").write_text(json.dumps(_v1_state("old", "local", records)))
    env = {"OPS_HOME": str(home)}
    status = run_ops(["status", "--json"], env=env)
    assert status.returncode == 0, status.stderr
    assert [(p["name"], p["alive"], p["backend"]) for p in json.loads(status.stdout)["processes"]] == [
        ("m/0", True, "local"), ("m/1", True, "local")]
    down = run_ops(["down"], env=env)
    assert down.returncode == 0, down.stderr
    assert "old: 2 stopped; verified: no process or port left" in down.stderr
    assert [p.wait(timeout=10) for p in procs] == [-15, -15]
    saved = json.loads((home / "old" / "state.json").read_text())
    assert (saved["version"], saved["status"], saved["nodes"][0]["backend"]) == (2, "down", "local")


def test_down_stops_a_tmux_fleet_recorded_by_version_1(tmp_path: Path) -> None:
    home, socket = tmp_path / "home", f"ops-test-{uuid.uuid4().hex[:10]}"
    try:
        out = subprocess.run(["tmux", "-L", socket, "new-session", "-d", "-P", "-F", "#{window_id} #{pane_pid}",
                              "-s", "ops-old", "-n", "m/0", "--", *SLEEPER], capture_output=True, text=True,
                             check=True).stdout.split()
        window, pid = out[0], int(out[1])
        state = _v1_state("old", "tmux", [_v1_record("m/0", pid, tmp_path / "m-0.log", window)],
                          tmux_socket=socket, tmux_session="ops-old")
        (home / "old").mkdir(parents=True)
        (home / "old" / "state.json").write_text(json.dumps(state))
        proc = psutil.Process(pid)
        down = run_ops(["down", "old"], env={"OPS_HOME": str(home)})
        assert down.returncode == 0, down.stderr
        assert "old: 1 stopped; verified: no process, port or tmux session left" in down.stderr
        assert not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
        has = subprocess.run(["tmux", "-L", socket, "has-session", "-t", "=ops-old"], capture_output=True,
                             check=False)
        assert has.returncode != 0
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, check=False)


def test_a_state_from_a_newer_version_says_what_to_do(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "new").mkdir(parents=True)
    (home / "new" / "state.json").write_text(json.dumps({"name": "new", "version": 9, "status": "up"}))
    down = run_ops(["down", "new"], env={"OPS_HOME": str(home)})
    assert down.returncode == 2
    assert down.stderr.strip() == (
        f"error: {home / 'new' / 'state.json'}: not a state file this version understands: it was written by "
        "a newer orchestra-ops (state version 9; this one reads up to 2): run `ops down` with that version")
