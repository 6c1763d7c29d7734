"""One sim process at fixed 200 ms latency, 256 concurrent, 10,000 requests from a lean aiohttp client.

The bound is 256 / 0.2 s = 1,280 req/s; the target is >= 0.85 of it on a 2-core machine, client
included. Reports (never asserts): requests, wall, req/s, ratio, p50/p99, server CPU s per 1,000.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time

import aiohttp
import psutil

from tests.simserver import SimServer

REQUESTS = int(os.environ.get("BENCH_SIM_REQUESTS", "10000"))
CONCURRENCY = 256
LATENCY_S = 0.2
BOUND = CONCURRENCY / LATENCY_S
TARGET = 0.85
BODY = {"model": "bench-model", "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "max_tokens": 64}


async def _drive(base_url: str, total: int) -> tuple[float, list[float], int]:
    url = f"{base_url}/v1/chat/completions"
    payload = json.dumps(BODY).encode()
    headers = {"Content-Type": "application/json"}
    latencies: list[float] = []
    errors = 0
    remaining = total
    connector = aiohttp.TCPConnector(limit=CONCURRENCY)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal remaining, errors
            while remaining > 0:
                remaining -= 1
                start = time.perf_counter()
                async with session.post(url, data=payload, headers=headers) as resp:
                    await resp.read()
                    if resp.status != 200:
                        errors += 1
                latencies.append(time.perf_counter() - start)

        remaining = CONCURRENCY  # warm-up: open the connections
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        latencies.clear()
        remaining = total
        begin = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        wall = time.perf_counter() - begin
    return wall, latencies, errors


def main() -> int:
    args = ["--latency-ms", str(LATENCY_S * 1000), "--max-model-len", "32768", "--seed", "1"]
    with SimServer(model="bench-model", args=args) as sim:
        proc = psutil.Process(sim.pid)
        cpu0 = proc.cpu_times()
        wall, latencies, errors = asyncio.run(_drive(sim.base_url, REQUESTS))
        cpu1 = proc.cpu_times()
    server_cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    rate = REQUESTS / wall
    cuts = statistics.quantiles(latencies, n=100)
    rows = [
        ("requests", f"{REQUESTS:,} ({errors} errors)"),
        ("concurrency", f"{CONCURRENCY}"),
        ("wall", f"{wall:.2f} s"),
        ("req/s", f"{rate:,.0f}"),
        ("ratio to bound", f"{rate / BOUND:.3f} (bound {BOUND:,.0f}/s, target >= {TARGET})"),
        ("p50 / p99", f"{cuts[49] * 1000:.0f} ms / {cuts[98] * 1000:.0f} ms"),
        ("server CPU / 1,000 req", f"{server_cpu / REQUESTS * 1000:.3f} s"),
        ("load avg (1 min)", f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
