"""Helpers of the chaos tests: `ops eval chat` runs as real subprocesses over module-wide sims."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.helpers import OPS, REPO
from tests.simserver import SimServer


def start_sim(tmp: Path, model: str = "m", args: Sequence[str] = ()) -> SimServer:
    """A sim for a whole module (stop it with `.stop()` in the fixture's teardown)."""
    return SimServer(model, args=list(args), log_dir=tmp).start()


def module_sim(tmp_path_factory: Any, args: Sequence[str]) -> Iterator[SimServer]:
    sim = start_sim(tmp_path_factory.mktemp("sim"), args=args)
    try:
        yield sim
    finally:
        sim.stop()


def chat_eval(config: Path, run_dir: Path, *extra: str) -> list[str]:
    return ["eval", "chat", "--no-analyze", "--model-config", str(config), "--run-dir", str(run_dir), *extra]


def start_ops(args: Sequence[str], env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([*OPS, *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


def answers(run_dir: Path) -> dict[Any, Any]:
    """id -> answer of each ok record (the sim is deterministic: a run's answers are known exactly)."""
    return {r["id"]: r["answer"] for r in _records(run_dir) if r["status"] == "ok"}


def _records(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def wait_for(predicate: Any, proc: subprocess.Popen[str] | None = None, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process exited ({proc.returncode}) before the condition held")
        time.sleep(0.02)
    raise AssertionError("the condition never held")
