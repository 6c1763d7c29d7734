"""Models bigger than one process on the real CPU fleet (the CPU build of vLLM, the tiny model, 2 cores).

1. Bring-up: `ops up` of each mode against its own single-process start (`ops up` of one replica, TP 1, the
   same topology otherwise): tensor parallel 2 (one core per rank) and vLLM internal DP 2. Ratio = the mode's
   seconds / the single process's seconds, measured in the same run. (Ray across hosts cannot run on the CPU
   build: vLLM's CPU platform refuses the Ray executor; external DP is refused for a dense model.)
2. One server per core vs vLLM internal DP over the same two cores: 2 replicas (ops's pool balances, one
   core each) against one `vllm serve --data-parallel-size 2` (vLLM balances its two ranks, one core each),
   N requests at concurrency 32 through ops's client (max_tokens 16, ignore_eos): requests/s and p99.
The machine's load average is printed with each table (it is shared; figures vary by about x2). Never asserts.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench.tables import table
from bench.vllm_fleet import down, missing, up, write_topology

REQUESTS = int(os.environ.get("BENCH_BIGMODELS_REQUESTS", "256"))
CONCURRENCY = 32
MODES: dict[str, dict[str, Any]] = {
    "single process (TP 1, 1 replica)": {"replicas": 1},
    "tensor parallel 2": {"replicas": 1, "tensor_parallel": 2},
    "vLLM internal DP 2": {"replicas": 2, "data_parallel": {"mode": "vllm-internal"}},
    "2 replicas (one per core)": {"replicas": 2},
}


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (5 min {five:.1f}) on {os.cpu_count()} cores"


def _topology(directory: Path, name: str, shape: dict[str, Any]) -> Path:
    """The tiny model's topology (one core per rank: cpus_per_replica 1) in this mode's shape; no LoRA in any
    mode (the same engine flags everywhere, so the modes differ only in their shape)."""
    path = write_topology(directory, name, shape["replicas"], **{k: v for k, v in shape.items() if k != "replicas"})
    doc = yaml.safe_load(path.read_text())
    for key in ("runtime_lora", "max_lora_rank"):
        doc["models"]["tiny"].pop(key, None)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


async def _load_test(directory: Path, name: str) -> tuple[float, float, int]:
    """(requests/s, p99 seconds, errors) of REQUESTS chat calls at CONCURRENCY through ops's client."""
    from orchestra_ops.client.fleet_client import FleetClient
    from orchestra_ops.client.sources import load_routing

    os.environ["OPS_HOME"] = str(directory / "ops-home")
    fleet = FleetClient(load_routing(name))
    client = fleet.client("tiny")
    gate = asyncio.Semaphore(CONCURRENCY)
    latencies: list[float] = []
    errors = 0

    async def one(index: int) -> None:
        nonlocal errors
        async with gate:  # no session key: ops's pool and vLLM's balancer each place calls their own way
            started = time.perf_counter()
            try:
                await client.chat([{"role": "user", "content": f"request {index}: the weather in paris"}],
                                  max_tokens=16, ignore_eos=True, temperature=0.7)
                latencies.append(time.perf_counter() - started)
            except Exception:
                errors += 1

    try:
        await client.chat([{"role": "user", "content": "warm up"}], max_tokens=2)
        started = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(REQUESTS)))
        wall = time.perf_counter() - started
    finally:
        await fleet.close()
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] if latencies else float("nan")
    return len(latencies) / wall, p99, errors


def main() -> int:
    reason = missing()
    if reason:
        print(f"skipped: {reason}")
        return 0
    bringup: dict[str, float] = {}
    serving: dict[str, tuple[float, float, int]] = {}
    loads: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-bigmodels-") as tmp:
        directory = Path(tmp)
        for index, (label, shape) in enumerate(MODES.items()):
            name = f"bench-big-{index}"
            topology = _topology(directory, name, shape)
            try:
                bringup[label], _ = up(directory, topology)
                loads.append(f"{label}: {_load()}")
                if shape["replicas"] == 2:
                    serving[label] = asyncio.run(_load_test(directory, name))
            finally:
                down(directory, name)
    single = bringup["single process (TP 1, 1 replica)"]
    table(f"bring-up, `ops up` to all READY ({_load()})", ["mode", "seconds", "vs single process"],
          [(label, f"{s:.1f}", f"{s / single:.2f}x") for label, s in bringup.items()
           if label != "2 replicas (one per core)"])
    rows = [(label, f"{rps:.1f}", f"{p99 * 1000:.0f}", errors) for label, (rps, p99, errors) in serving.items()]
    table(f"{REQUESTS} requests at concurrency {CONCURRENCY}, max_tokens 16, same 2 cores",
          ["fleet", "req/s", "p99 ms", "errors"], rows)
    print("\n".join(loads))
    if len(serving) == 2:
        (a, (rps_a, p99_a, _)), (b, (rps_b, p99_b, _)) = serving.items()
        print(f"{a} vs {b}: req/s {rps_a / rps_b:.2f}x, p99 {p99_a / p99_b:.2f}x")
    return 0
