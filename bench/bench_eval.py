"""The eval engine: throughput against the bound, the thread + token-bucket pattern, resume, HTTP clients.

1. Throughput: 4 sim replicas at a fixed 200 ms; `ops bench` (the eval's client and pool) at
   concurrency 256 for 10,000 requests. The bound is 256 / 0.2 s = 1,280 req/s; target >= 0.85.
2. The pattern users are leaving: a ThreadPoolExecutor calling the OpenAI SDK behind a
   5-query-per-second token bucket (OpenCompass's OpenAISDK wrapper), 500 requests, same replicas.
3. Resume: open a 50,000-line results.jsonl and compute the ids still to run.
4. HTTP client: the same pool and chat call at concurrency 256 over one shared httpx AsyncClient,
   aiohttp with a connector per replica, and keep-alive HTTP/1.1 per replica (client/http1.py, the
   transport the engine uses).
Client and servers share this machine's cores; the load average is printed. Never asserts; returns 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from bench.tables import table
from orchestra_ops.client.call_errors import TransportError
from orchestra_ops.client.capacity import measure
from orchestra_ops.client.fleet_client import FleetClient
from orchestra_ops.client.replica import Replica
from orchestra_ops.client.routing import from_model_config
from orchestra_ops.client.transport import AiohttpTransport, KeepAliveTransport, Response, Transport
from orchestra_ops.runner.prepare import select_tasks
from orchestra_ops.runner.results import ResultsStore
from tests.simserver import SimServer

REPLICAS = 4
LATENCY_MS = 200
CONCURRENCY = 256
REQUESTS = 10_000
BOUND = CONCURRENCY / (LATENCY_MS / 1000)
TARGET = 0.85
BUCKET_QPS = 5.0
BUCKET_REQUESTS = 500
STORE_LINES = 50_000
CLIENT_REQUESTS = 3_000


# 1. ops bench


def _ops_bench(config: Path) -> dict:
    proc = subprocess.run([sys.executable, "-m", "orchestra_ops", "bench", "m", "--model-config", str(config),
                           "--concurrency", str(CONCURRENCY), "--requests", str(REQUESTS), "--json"],
                          capture_output=True, text=True, check=False, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"ops bench failed ({proc.returncode}): {proc.stderr}")
    result: dict = json.loads(proc.stdout)["results"][0]
    return result


# 2. threads + token bucket


class TokenBucket:
    """OpenCompass-style rate limit: `rate` tokens a second, a caller blocks until one is free."""

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate
        self.lock = threading.Lock()
        self.next_free = time.monotonic()

    def get_token(self) -> None:
        with self.lock:
            now = time.monotonic()
            wait = self.next_free - now
            self.next_free = max(now, self.next_free) + self.interval
        if wait > 0:
            time.sleep(wait)


def _threads_with_bucket(sims: list[SimServer]) -> tuple[float, int]:
    import openai

    clients = [openai.OpenAI(base_url=f"{s.base_url}/v1", api_key="EMPTY", max_retries=0) for s in sims]
    bucket = TokenBucket(BUCKET_QPS)

    def one(i: int) -> bool:
        bucket.get_token()
        try:
            clients[i % len(clients)].chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hello"}], max_tokens=16)
        except openai.OpenAIError:
            return False
        return True

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=32) as pool:
        ok = sum(pool.map(one, range(BUCKET_REQUESTS)))
    return BUCKET_REQUESTS / (time.perf_counter() - start), ok


# 3. resume


def _resume_times() -> list[float]:
    answer = "Let me work through this step by step. The final answer is \\boxed{42}. " * 4
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        with open(Path(tmp) / "results.jsonl", "w") as handle:
            for i in range(STORE_LINES):
                record = {"id": f"hle-{i:06d}", "status": "ok" if i % 20 else "error", "answer": answer,
                          "usage": {"prompt_tokens": 812, "completion_tokens": 95}, "elapsed": 3.2}
                handle.write(json.dumps(record) + "\n")
        samples = [{"id": f"hle-{i:06d}"} for i in range(STORE_LINES + 1_000)]
        for _ in range(5):
            start = time.perf_counter()
            store = ResultsStore(tmp)
            remaining = select_tasks(samples, store, resume=True, retry_failed=False)
            times.append(time.perf_counter() - start)
            assert len(remaining) == 1_000
    return times


# 4. HTTP clients


class SharedHttpxTransport:
    """One httpx.AsyncClient for every replica (the pattern DESIGN.md section 7 measured)."""

    def __init__(self) -> None:
        self.client = httpx.AsyncClient(limits=httpx.Limits(max_connections=1024, max_keepalive_connections=1024),
                                        trust_env=False)

    async def post(self, replica: Replica, url: str, body: bytes, headers: Mapping[str, str],
                   timeout: float) -> Response:
        try:
            resp = await self.client.post(url, content=body, headers=dict(headers), timeout=timeout)
        except httpx.TimeoutException as exc:
            raise TransportError("timeout", str(exc)) from None
        except httpx.HTTPError as exc:
            raise TransportError("connection", str(exc)) from None
        return Response(resp.status_code, resp.headers, resp.content)

    async def get(self, replica: Replica, url: str, timeout: float) -> Response:
        resp = await self.client.get(url, timeout=timeout)
        return Response(resp.status_code, resp.headers, resp.content)

    async def close(self) -> None:
        await self.client.aclose()


async def _client_run(config: Path, transport: Transport) -> tuple[float, float]:
    from orchestra_ops.fleet.endpoints import read_endpoints

    routing = from_model_config(read_endpoints(config), source=str(config), name="bench")
    fleet = FleetClient(routing, transport=transport)
    cpu0 = time.process_time()
    try:
        result = await measure(fleet, "m", concurrency=CONCURRENCY, requests=CLIENT_REQUESTS)
    finally:
        await fleet.close()
    return result.req_per_s, (time.process_time() - cpu0) / CLIENT_REQUESTS * 1e6


def main() -> int:
    print(f"load average before: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()})")
    sims = [SimServer("m", args=["--latency-ms", str(LATENCY_MS)]) for _ in range(REPLICAS)]
    try:
        for sim in sims:
            sim.start()
        with tempfile.TemporaryDirectory() as tmp:
            config = Path(tmp) / "model_config.json"
            config.write_text(json.dumps({"m": [{"ip_addr": "127.0.0.1", "port": s.port} for s in sims]}))
            ours = _ops_bench(config)
            bucket_rate, bucket_ok = _threads_with_bucket(sims)
            keepalive = asyncio.run(_client_run(config, KeepAliveTransport()))
            aio = asyncio.run(_client_run(config, AiohttpTransport()))
            httpx_shared = asyncio.run(_client_run(config, SharedHttpxTransport()))
    finally:
        for sim in sims:
            sim.stop()
    rate = ours["req_per_s"]
    table(f"1-2. throughput: {REPLICAS} sim replicas at {LATENCY_MS} ms, bound {BOUND:,.0f} req/s",
          ["harness", "requests", "req/s", "of bound", "p50 ms", "p99 ms", "errors"],
          [[f"ops bench (concurrency {CONCURRENCY})", str(REQUESTS), f"{rate:,.1f}", f"{rate / BOUND:.2f}",
            f"{ours['p50_s'] * 1000:.0f}", f"{ours['p99_s'] * 1000:.0f}", json.dumps(ours["errors"])],
           [f"threads + {BUCKET_QPS:g} qps token bucket", str(BUCKET_REQUESTS), f"{bucket_rate:,.1f}",
            f"{bucket_rate / BOUND:.3f}", "-", "-", str(BUCKET_REQUESTS - bucket_ok)]])
    verdict = "meets" if rate / BOUND >= TARGET else "MISSES"
    print(f"  ratio ops bench / thread pool: {rate / bucket_rate:.0f}x; {rate / BOUND:.2f} of the bound "
          f"{verdict} the {TARGET} target")
    times = _resume_times()
    table(f"3. resume: open a {STORE_LINES:,}-line results.jsonl and compute the remaining ids",
          ["runs", "best s", "median s"], [[str(len(times)), f"{min(times):.3f}", f"{statistics.median(times):.3f}"]])
    table(f"4. HTTP client at concurrency {CONCURRENCY}, {CLIENT_REQUESTS} requests, same pool and chat call",
          ["transport", "req/s", "of bound", "client CPU us/request"],
          [["keep-alive HTTP/1.1 + httptools per replica (used)", f"{keepalive[0]:,.1f}",
            f"{keepalive[0] / BOUND:.2f}", f"{keepalive[1]:.0f}"],
           ["aiohttp, a connector per replica", f"{aio[0]:,.1f}", f"{aio[0] / BOUND:.2f}", f"{aio[1]:.0f}"],
           ["one shared httpx.AsyncClient", f"{httpx_shared[0]:,.1f}", f"{httpx_shared[0] / BOUND:.2f}",
            f"{httpx_shared[1]:.0f}"]])
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
