"""Retrieval server: micro-batching against the one-at-a-time baseline, and against the bare encoder.

5,000 generated documents, 2,000 single-query requests (short agent-style search queries, 4-10
words, each about one document) at concurrency 256, sent by an
aiohttp client in this process to a real `ops serve retrieval` subprocess, once with
`--batching on` and once with `--batching off` (one after the other, so they never share the CPU).
The offline line is the encoder alone on the same 2,000 queries at batch 64, in this process.
Targets: on/off throughput >= 3x; on/offline >= 0.7. It reports; it does not assert.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import numpy as np
import psutil

from tests.helpers import OPS, free_port, kill_tree
from tests.retrieval_data import make_corpus

N_DOCS = 5000
N_QUERIES = 2000
CONCURRENCY = 256
OFFLINE_BATCH = 64
TOPK = 3


@dataclass
class Run:
    name: str
    seconds: float
    latencies: list[float]
    errors: int
    mean_batch: float | None = None
    server_cpu_s: float = 0.0  # CPU the server process used while under load

    @property
    def throughput(self) -> float:
        return len(self.latencies) / self.seconds

    def pct(self, q: float) -> float:
        return float(np.percentile(self.latencies, q)) * 1000 if self.latencies else float("nan")


def main() -> int:
    from orchestra_ops.services.retrieval.encoder import load_encoder
    from orchestra_ops.services.retrieval.index import build_index

    with tempfile.TemporaryDirectory(prefix="bench-retrieval-") as tmp:
        work = Path(tmp)
        docs = make_corpus(N_DOCS, seed=11)
        encoder = load_encoder(None, "cpu")
        start = time.perf_counter()
        build_index(docs, work / "index", encoder, batch_size=256)
        print(f"indexed {N_DOCS} documents in {time.perf_counter() - start:.1f} s", flush=True)
        rng = random.Random(3)
        queries = [agent_query(d["content"], rng) for d in rng.sample(docs, N_QUERIES)]

        encoder.encode(queries[:OFFLINE_BATCH], OFFLINE_BATCH)  # warm-up
        start, cpu_start = time.perf_counter(), time.process_time()
        for i in range(0, N_QUERIES, OFFLINE_BATCH):
            encoder.encode(queries[i : i + OFFLINE_BATCH], OFFLINE_BATCH)
        offline_qps = N_QUERIES / (time.perf_counter() - start)
        offline_cpu_s = time.process_time() - cpu_start
        del encoder

        runs = [serve_and_load(work, mode, queries) for mode in ("on", "off")]

    on, off = runs
    print()
    print(f"{'mode':<18}{'requests':>9}{'wall s':>9}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>10}{'errors':>8}{'batch':>8}")
    for run in runs:
        batch = f"{run.mean_batch:.1f}" if run.mean_batch is not None else "-"
        print(
            f"{'batching ' + run.name:<18}{len(run.latencies):>9}{run.seconds:>9.2f}{run.throughput:>9.1f}"
            f"{run.pct(50):>9.1f}{run.pct(99):>10.1f}{run.errors:>8}{batch:>8}"
        )
    print(f"{'offline encoder@64':<18}{N_QUERIES:>9}{N_QUERIES / offline_qps:>9.2f}{offline_qps:>9.1f}")
    print()
    print(f"throughput on/off:          {on.throughput / off.throughput:.2f}x   (target >= 3x)")
    print(f"throughput on/offline@64:   {on.throughput / offline_qps:.2f}    (target >= 0.7)")
    print(f"(cores: {os.cpu_count()}; the machine may be shared, so absolute numbers can be depressed)")
    # Where the CPU goes: the server cannot beat the encoder's own CPU cost per query, and on a small
    # machine the HTTP layer and the load client share the cores with it.
    per_k = 1000 / N_QUERIES
    print(f"CPU per 1,000 queries: offline encoder {offline_cpu_s * per_k:.2f} s; server with batching on "
          f"{on.server_cpu_s * per_k:.2f} s (encoder + HTTP); wall with batching on {on.seconds * per_k:.2f} s "
          f"on {os.cpu_count()} cores")
    return 0


DOC_SHAPE = re.compile(
    r"^(?P<name>\w+) is an? (?P<job>.+?) from (?P<city>.+?), born in (?P<year>\d+), "
    r"who collects (?P<thing>.+?) and plays (?P<sport>.+?) on weekends\.$"
)
QUERY_TEMPLATES = (
    "which {job} from {city} collects {thing}?",
    "{name} {job} born {year}",
    "who plays {sport} and collects {thing} in {city}",
    "{thing} collector {city} {sport}",
)


def agent_query(content: str, rng: random.Random) -> str:
    """A short search query about one document, the way an agent writes them (4-10 words)."""
    match = DOC_SHAPE.match(content)
    assert match, content
    return rng.choice(QUERY_TEMPLATES).format(**match.groupdict())


def serve_and_load(work: Path, mode: str, queries: list[str]) -> Run:
    port = free_port()
    argv = [*OPS, "serve", "retrieval", "--index-dir", str(work / "index"), "--port", str(port), "--batching", mode]
    log = work / f"server-{mode}.log"
    with log.open("wb") as handle:
        proc = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        asyncio.run(wait_healthy(port, proc, log))
        server = psutil.Process(proc.pid)
        before = server.cpu_times()
        run = asyncio.run(load(port, queries, mode))
        after = server.cpu_times()
        run.server_cpu_s = (after.user + after.system) - (before.user + before.system)
        run.mean_batch = asyncio.run(mean_batch(port))
        return run
    finally:
        kill_tree(proc.pid)


async def wait_healthy(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 300
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited {proc.returncode}:\n{log.read_text(errors='replace')}")
            try:
                async with session.get(f"http://127.0.0.1:{port}/health") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
    raise RuntimeError(f"server on port {port} not healthy after 300 s")


async def load(port: int, queries: list[str], mode: str) -> Run:
    url = f"http://127.0.0.1:{port}/retrieve"
    latencies: list[float] = []
    errors = 0
    todo = iter(queries)
    connector = aiohttp.TCPConnector(limit=CONCURRENCY)
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        for q in queries[:8]:  # warm the connection path
            async with session.post(url, json={"queries": [q], "topk": TOPK}) as response:
                await response.read()

        async def worker() -> None:
            nonlocal errors
            for query in todo:
                sent = time.perf_counter()
                async with session.post(url, json={"queries": [query], "topk": TOPK, "return_scores": True}) as r:
                    body = await r.json()
                if r.status != 200 or len(body) != 1 or len(body[0]) != TOPK:
                    errors += 1
                    continue
                latencies.append(time.perf_counter() - sent)

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        seconds = time.perf_counter() - start
    return Run(mode, seconds, latencies, errors)


async def mean_batch(port: int) -> float | None:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/metrics") as response:
        text = await response.text()
    count = re.search(r"^retrieval_batch_size_count (\d+)$", text, re.M)
    total = re.search(r"^retrieval_batch_size_sum ([\d.]+)$", text, re.M)
    if not count or not total or int(count.group(1)) == 0:
        return None
    return float(total.group(1)) / int(count.group(1))


if __name__ == "__main__":
    sys.exit(main())
