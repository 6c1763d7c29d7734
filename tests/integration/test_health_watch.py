"""`ops health --watch`: on a terminal one table redrawn in place; without one, a table per probe."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from orchestra_ops.fleet.state import FleetState, NodeRecord, ProcessRecord, write_state
from tests.helpers import OPS, REPO, kill_tree
from tests.simserver import SimServer
from tests.terminal import Terminal


def _fleet(ops_home: Path, sim: SimServer) -> None:
    """state.json of a fleet 'watched' whose one process is this sim (as `ops up` records it)."""
    assert sim.process is not None
    pid = sim.process.pid
    node = NodeRecord(name="cpu", backend="local", host="127.0.0.1")
    record = ProcessRecord(name="m/0", group="m", kind="sim", node="cpu", backend="local", pid=pid,
                           pgid=os.getpgid(pid), sid=None,
                           create_time=psutil.Process(pid).create_time(), host="127.0.0.1", port=sim.port,
                           log=str(sim.log_path), argv=sim.argv, env={}, served_model_name="m", endpoint_key="m")
    write_state(FleetState(name="watched", topology_file=str(ops_home / "t.yaml"), backend="local", status="up",
                           started_at=time.time(), cwd=str(ops_home), nodes=[node], processes=[record]),
                ops_home / "watched" / "state.json")


def test_watch_redraws_in_place_on_a_terminal(tmp_path: Path, terminal: Terminal,
                                              sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("m", args=["--latency-ms", "1"])
    _fleet(tmp_path / "ops", sim)
    command = shlex.join([sys.executable, "-m", "orchestra_ops", "health", "watched", "--watch", "0.3"])
    terminal.run(f"cd {shlex.quote(str(REPO))} && OPS_HOME={shlex.quote(str(tmp_path / 'ops'))} {command}")
    terminal.wait_for("watched: 1/1 ready")
    terminal.wait_for("probed ")
    sim.stop()  # the replica goes away while we watch: the same table turns to 0/1
    screen = terminal.wait_for("watched: 0/1 ready")
    assert "1/1 ready" not in screen, screen  # redrawn in place, not printed below the old one
    assert screen.count("watched: 0/1 ready") == 1 and screen.count("host:port") == 1, screen
    terminal.keys("C-c")
    screen = terminal.wait_for("EXIT=")
    assert "EXIT=1" in screen  # not every process is ready
    assert "Traceback" not in screen and "KeyboardInterrupt" not in screen


def test_watch_without_a_terminal_prints_a_table_per_probe(tmp_path: Path,
                                                           sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("m", args=["--latency-ms", "1"])
    _fleet(tmp_path / "ops", sim)
    out = tmp_path / "out.txt"
    with open(out, "w") as handle:
        proc = subprocess.Popen([*OPS, "health", "watched", "--watch", "0.2"], cwd=REPO, stdout=handle,
                                stderr=subprocess.STDOUT, env={**os.environ, "OPS_HOME": str(tmp_path / "ops")})
    try:
        deadline = time.monotonic() + 60
        while out.read_text().count("watched: 1/1 ready") < 3:
            assert proc.poll() is None and time.monotonic() < deadline, out.read_text()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        kill_tree(proc.pid)
    text = out.read_text()
    assert "\x1b[" not in text and "Traceback" not in text
