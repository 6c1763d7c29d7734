"""Bring-up: 8 sim replicas, each with a 3 s startup delay, through a real `ops up` (local backend).

Reports seconds from `ops up` to "all READY" (the command returning) against
  - the 3 s the slowest replica needs by itself (target: at most 1.5x),
  - one replica brought up alone by `ops up` (the same overheads: interpreter start, probes),
  - the manual way: one launch every 20 s, 7 x 20 s + 3 s = 143 s (computed, not waited).
Never asserts; returns 0.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import yaml

from tests.helpers import free_port_block, run_ops

REPLICAS = 8
STARTUP_DELAY_S = 3.0
MANUAL_GAP_S = 20.0
TARGET_RATIO = 1.5


def _topology(directory: Path, name: str, replicas: int) -> Path:
    body = {
        "name": name, "backend": "local",
        "defaults": {"ulimit_nofile": 4096, "ready_timeout_s": 300},
        "nodes": {"cpu": {"host": "localhost", "gpus": 0}},
        "models": {"m": {"model": "sim/bench", "engine": "sim", "node": "cpu", "replicas": replicas,
                         "gpus_per_replica": 0, "port": free_port_block(replicas),
                         "sim": {"latency_ms": 1, "startup_delay_s": STARTUP_DELAY_S}}},
    }
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def _bring_up(directory: Path, name: str, replicas: int) -> float | None:
    env = {"OPS_HOME": str(directory / "ops-home")}
    topology = _topology(directory, name, replicas)
    started = time.perf_counter()
    result = run_ops(["up", str(topology)], env=env, cwd=directory, timeout=600)
    elapsed = time.perf_counter() - started
    run_ops(["down", name, "--timeout", "10"], env=env, cwd=directory, timeout=120)
    if result.returncode != 0:
        print(f"`ops up` of {name} failed:\n{result.stderr}", file=sys.stderr)
        return None
    return elapsed


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-bringup-") as tmp:
        directory = Path(tmp)
        load = os.getloadavg()[0]
        single = _bring_up(directory, "bench-one", 1)
        fleet = _bring_up(directory, "bench-eight", REPLICAS)
    if single is None or fleet is None:
        return 0
    manual = (REPLICAS - 1) * MANUAL_GAP_S + STARTUP_DELAY_S
    rows = [
        ("ops up, 8 replicas, to all READY", f"{fleet:.2f} s", ""),
        ("slowest replica by itself (startup delay)", f"{STARTUP_DELAY_S:.2f} s",
         f"{fleet / STARTUP_DELAY_S:.2f}x (target <= {TARGET_RATIO}x)"),
        ("ops up, 1 replica, to READY", f"{single:.2f} s", f"{fleet / single:.2f}x"),
        ("manual: a launch every 20 s, 7 x 20 + 3", f"{manual:.0f} s", f"{manual / fleet:.1f}x faster"),
    ]
    width = max(len(row[0]) for row in rows)
    print(f"{'':<{width}}  {'seconds':>9}  ratio")
    for label, seconds, ratio in rows:
        print(f"{label:<{width}}  {seconds:>9}  {ratio}")
    print(f"(load average at start: {load:.2f} on {os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
