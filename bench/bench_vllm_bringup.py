"""Bring-up of real vLLM: `ops up` of two replicas against one replica started by hand.

  - by hand: the exact command and environment `ops plan --json` gives for replica tiny/0 of the same
    topology (`vllm serve` of the tiny model, eager, fp32, 64 MiB KV, hermes, LoRA, one core), started in a
    session of its own and polled until GET /health answers 200; then its process group is stopped.
  - `ops up` of the two replicas (topologies/vllm_cpu.yaml, free ports): seconds until the command returned
    with both READY (readiness = serving: /health, /v1/models, a 1-token chat), which includes the pre-launch
    check in which each node's vLLM parses the exact argv (`ops up` prints its own launch-to-ready time too).
Alternately, ROUNDS times each. Goal: ops up <= 1.2x the single replica. Never asserts.
"""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.tables import table
from bench.vllm_fleet import down, missing, up, write_topology
from tests.helpers import run_ops

ROUNDS = 2
GOAL = 1.2


def _by_hand(directory: Path, topology: Path) -> float:
    """One replica as a user starts it: the plan's command for tiny/0, polled until /health is 200."""
    planned = run_ops(["plan", "--json", str(topology)], env={"OPS_HOME": str(directory / "ops-home")},
                      cwd=directory, timeout=120)
    spec = json.loads(planned.stdout)["processes"][0]
    env = {**os.environ, **spec["env"]}
    log = directory / "by-hand.log"
    with log.open("ab") as handle:
        started = time.perf_counter()
        proc = subprocess.Popen(spec["argv"], env=env, cwd=directory, stdout=handle, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"vllm serve exited {proc.returncode}; see {log}")
            try:
                if httpx.get(spec["health_url"], timeout=2).status_code == 200:
                    return time.perf_counter() - started
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the group: never only the API server (its EngineCore would stay)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        time.sleep(3)  # EngineCore and Worker follow the API server within ~3 s (recipe §9)


def main() -> int:
    why = missing()
    if why:
        print(f"skipped: {why}")
        return 0
    hand: list[float] = []
    ops: list[float] = []
    ops_ready: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-vllm-bringup-") as tmp:
        directory = Path(tmp)
        load = os.getloadavg()[0]
        for index in range(ROUNDS):
            name = f"bench-vllm-up-{index}"
            topology = write_topology(directory, name, 2)
            hand.append(_by_hand(directory, topology))
            try:
                elapsed, output = up(directory, topology)
            finally:
                down(directory, name)
            ops.append(elapsed)
            match = re.search(r"ready in ([0-9.]+) s", output)
            ops_ready.append(float(match.group(1)) if match else float("nan"))
            print(f"round {index + 1}: by hand {hand[-1]:.1f} s, ops up {ops[-1]:.1f} s "
                  f"(launch to ready {ops_ready[-1]:.1f} s)", flush=True)
    rows: list[tuple[object, ...]] = [
        (i + 1, f"{h:.1f}", f"{o:.1f}", f"{r:.1f}", f"{o / h:.2f}", f"{r / h:.2f}")
        for i, (h, o, r) in enumerate(zip(hand, ops, ops_ready, strict=True))]
    ratio = statistics.median(ops) / statistics.median(hand)
    rows.append(("median", f"{statistics.median(hand):.1f}", f"{statistics.median(ops):.1f}",
                 f"{statistics.median(ops_ready):.1f}", f"{ratio:.2f}",
                 f"{statistics.median(ops_ready) / statistics.median(hand):.2f}"))
    table(f"bring-up of real vLLM (tiny model, CPU, 2 cores), load avg {load:.1f} at the start",
          ["round", "1 replica by hand s", "ops up 2 replicas s", "of which launch to ready s", "ops / hand",
           "launch-to-ready / hand"], rows)
    print(f"goal: ops up <= {GOAL}x one replica's own start: {'met' if ratio <= GOAL else 'NOT met'} "
          f"(median ratio {ratio:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
