"""Helpers of the eval integration tests: endpoints files over SimServers, datasets, results."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

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


def results(run_dir: Path) -> list[dict[str, Any]]:
    """Every line of results.jsonl, each of which must parse."""
    text = (run_dir / "results.jsonl").read_text()
    assert text == "" or text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def total(sims: Sequence[SimServer], name: str) -> float:
    return sum(s.metrics().get(name, 0.0) for s in sims)
