"""Helpers of the eval integration tests: endpoints files over SimServers, datasets, results."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tests.helpers import OPS, REPO, kill_tree
from tests.simserver import SimServer


def model_config(path: Path, servers: dict[str, Sequence[SimServer]]) -> Path:
    path.write_text(json.dumps({name: [{"ip_addr": "127.0.0.1", "port": s.port} for s in sims]
                                for name, sims in servers.items()}))
    return path


def dataset(path: Path, ids: Iterable[Any], prompt: str = "What is the capital of France?") -> Path:
    path.write_text("".join(json.dumps({"id": i, "prompt": f"{prompt} ({i})"}) + "\n" for i in ids))
    return path


def wait_lines(path: Path, count: int, proc: subprocess.Popen[Any], timeout_s: float = 60.0) -> None:
    """Return once `path` holds `count` lines while `proc` still runs (to kill it mid-run)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists() and path.read_bytes().count(b"\n") >= count:
            return
        time.sleep(0.02)
    raise AssertionError(f"{path} never reached {count} lines (exit {proc.poll()})")


def kill9_mid_run(args: Sequence[str], results_file: Path, lines: int, *, env: dict[str, str] | None = None,
                  timeout_s: float = 120.0) -> None:
    """Run `ops ARGS` (from the repo) and SIGKILL it once `results_file` holds `lines` lines, mid-run;
    whatever it left is killed by pid. The kill must land while it still runs."""
    proc = subprocess.Popen([*OPS, *args], cwd=REPO, env={**os.environ, **(env or {})},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_lines(results_file, lines, proc, timeout_s=timeout_s)
        assert proc.poll() is None, "the run ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        kill_tree(proc.pid)
    assert proc.returncode == -signal.SIGKILL


def results(run_dir: Path) -> list[dict[str, Any]]:
    """Every line of results.jsonl, each of which must parse."""
    text = (run_dir / "results.jsonl").read_text()
    assert text == "" or text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def total(sims: Sequence[SimServer], name: str) -> float:
    return sum(s.metrics().get(name, 0.0) for s in sims)
