"""Helpers of the supervisor tests: detach a chat eval over a sim, read its run dir, clean up by pid."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from orchestra_ops.supervise.detach import tmux_socket
from tests.helpers import kill_tree, run_ops


def run_info(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "run.json"
    return json.loads(path.read_text()) if path.exists() else {}


def events(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_until(check: Callable[[], Any], what: str, timeout_s: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout_s} s")


def supervisor_state(run_dir: Path) -> str | None:
    return run_info(run_dir).get("supervisor", {}).get("state")


def attempt_pid(run_dir: Path, n: int) -> int | None:
    """The pid of attempt n (1-based) once it runs."""
    attempts = run_info(run_dir).get("attempts", [])
    return attempts[n - 1].get("pid") if len(attempts) >= n else None


def runs_json(root: Path) -> dict[str, dict[str, Any]]:
    """`ops runs --root ROOT --json`, by run name."""
    result = run_ops(["runs", "--root", str(root), "--json"])
    assert result.returncode == 0, result.stderr
    return {row["name"]: row for row in json.loads(result.stdout)}


@pytest.fixture(name="detached")
def detached_fixture() -> Iterator[Callable[..., subprocess.CompletedProcess[str]]]:
    """`detached(args, run_dir[, env])`: `ops eval … --detach` (it returns at once); at teardown the supervisor
    and its evals are killed by pid and the run's own tmux server is killed (only the sockets started here)."""
    started: list[Path] = []

    def detach(args: list[str], run_dir: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        started.append(run_dir)
        return run_ops([*args, "--run-dir", str(run_dir), "--detach"], env=env)

    yield detach
    for run_dir in started:
        info = run_info(run_dir)
        pids = [a.get("pid") for a in info.get("attempts", [])] + [info.get("supervisor", {}).get("pid")]
        for pid in pids:
            if pid and ours(pid, run_dir):
                kill_tree(pid)
        socket = tmux_socket(run_dir)
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, check=False)
        tmux_dir = Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}"
        (tmux_dir / socket).unlink(missing_ok=True)  # this test's own socket only


def ours(pid: int, run_dir: Path) -> bool:
    """Is `pid` still a process of this run (its command line names the run dir), not a recycled pid?"""
    try:
        return str(run_dir) in " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return False
