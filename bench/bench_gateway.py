"""The gateway against going direct and against its peers, in front of the same 4 sims at 200 ms.

Part 1 (throughput): `ops bench m --concurrency 256` (whole processes, the same load generator for
every row) straight to the 4 sims (the pool: direct), then through `ops serve gateway`, vLLM's
router (`vllm-router`, the Rust router from its PyPI wheel, --policy round_robin: its cheapest) and
LiteLLM's proxy, each one URL in front of the same sims. The rows take turns over BENCH_GATEWAY_ROUNDS
rounds (LiteLLM, 15x slower, only in the first) and each figure is the median, with the range of req/s:
one pass is not enough to rank two hops 1-2% apart on a shared 2-core machine. Per row: req/s, its
ratio to direct, p50/p99 and what the hop adds to direct's, the CPU the hop's process tree spent per
request, and ops bench's own CPU per request. The peers live in bench/.venv-peers (scripts/build_bench_peers.sh);
a peer that is not installed is reported as such. Goals (issue 27): gateway >= 0.9 of direct, at
least as fast as vLLM's router, >= 5x LiteLLM's proxy.

Part 2 (latency): one call at a time (concurrency 1, BENCH_GATEWAY_LATENCY_REQUESTS each), direct, the
gateway and vLLM's router in turn over the rounds: the p50/p99 each hop adds when nothing queues.

Part 3 (affinity): 64 sessions x 4 rounds of a growing conversation (a long system prompt of its
own per session), all sessions in flight each round, against 4 fresh prompt sets: ops's own pool
with session affinity (the engine), the gateway with `x-session-id`, the gateway without it (a hash
of the first system and user message), and the engine with affinity off. The sims' prefix-cache
counters (vllm:prefix_cache_hits_total / queries_total, in tokens) give each run's hit rate.

Env: BENCH_GATEWAY_REQUESTS (default 6000), BENCH_GATEWAY_LITELLM_REQUESTS (default 1500),
BENCH_GATEWAY_ROUNDS (default 3), BENCH_GATEWAY_LATENCY_REQUESTS (default 100),
BENCH_GATEWAY_PARTS (default "throughput,latency,affinity").
Never asserts; returns 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil

from bench.bench_ops_bench import run_ops_bench
from bench.tables import table
from orchestra_ops.client.fleet_client import FleetClient
from orchestra_ops.client.routing import from_model_config
from orchestra_ops.fleet.endpoints import read_endpoints
from tests.helpers import REPO, free_port, kill_tree
from tests.simserver import SimServer

REPLICAS = 4
LATENCY_MS = 200
CONCURRENCY = 256
REQUESTS = int(os.environ.get("BENCH_GATEWAY_REQUESTS", "6000"))
LITELLM_REQUESTS = int(os.environ.get("BENCH_GATEWAY_LITELLM_REQUESTS", "1500"))
THROUGHPUT_ROUNDS = int(os.environ.get("BENCH_GATEWAY_ROUNDS", "3"))
LATENCY_REQUESTS = int(os.environ.get("BENCH_GATEWAY_LATENCY_REQUESTS", "100"))
PEERS = REPO / "bench" / ".venv-peers" / "bin"
SESSIONS, ROUNDS = 64, 4


def _tree_cpu(pid: int) -> float:
    try:
        proc = psutil.Process(pid)
        procs = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for item in procs:
        try:
            times = item.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def _wait_http(url: str, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: the process exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{url} not answering after {timeout:g} s")


def _start(argv: list[str], health: str, log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, **(env or {})}, cwd=log.parent)
    try:
        _wait_http(health, proc)
    except BaseException:
        kill_tree(proc.pid)
        raise
    return proc


def _config(path: Path, ports: list[int]) -> Path:
    path.write_text(json.dumps({"m": [{"ip_addr": "127.0.0.1", "port": p} for p in ports]}))
    return path


def _hop_argv(name: str, tmp: Path, sims: list[SimServer], port: int) -> tuple[list[str], str, dict[str, str]] | None:
    if name == "ops gateway":
        direct = _config(tmp / "direct.json", [s.port for s in sims])
        return ([sys.executable, "-m", "orchestra_ops", "serve", "gateway", "--model-config", str(direct), "--port",
                 str(port), "--run-dir", str(tmp / "gwrun")], f"http://127.0.0.1:{port}/health", {})
    if name == "vllm-router":
        if not (PEERS / "vllm-router").exists():
            return None
        return ([str(PEERS / "vllm-router"), "--host", "127.0.0.1", "--port", str(port), "--policy", "round_robin",
                 "--max-concurrent-requests", "4096", "--log-level", "warning", "--worker-urls",
                 *[s.base_url for s in sims]], f"http://127.0.0.1:{port}/health", {})
    if name == "litellm proxy":
        if not (PEERS / "litellm").exists():
            return None
        config = tmp / "litellm.yaml"
        config.write_text(json.dumps({"model_list": [
            {"model_name": "m", "litellm_params": {"model": "openai/m", "api_base": f"{s.base_url}/v1",
                                                   "api_key": "none"}} for s in sims],
            "litellm_settings": {"telemetry": False}}))
        return ([str(PEERS / "litellm"), "--config", str(config), "--port", str(port), "--host", "127.0.0.1"],
                f"http://127.0.0.1:{port}/health/liveliness",
                {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR", "DISABLE_SCHEMA_UPDATE": "true"})
    raise ValueError(name)


def _measure(name: str, tmp: Path, sims: list[SimServer], direct: Path, concurrency: int = CONCURRENCY,
             requests: int | None = None) -> dict[str, Any] | str:
    """One row's figures (a hop started for it, warmed, measured, stopped), or why there are none."""
    if requests is None:
        requests = LITELLM_REQUESTS if name == "litellm proxy" else REQUESTS
    proc = None
    config = direct
    if name != "direct (ops bench)":
        port = free_port()
        hop = _hop_argv(name, tmp, sims, port)
        if hop is None:
            return "not installed (scripts/build_bench_peers.sh)"
        argv, health, env = hop
        try:
            proc = _start(argv, health, tmp / f"{name.replace(' ', '-')}.log", env)
        except (RuntimeError, TimeoutError) as exc:
            return f"did not start: {exc}"
        config = _config(tmp / f"via-{port}.json", [port])
        run_ops_bench(config, 32, 200)  # warm: connections, lazy imports
    try:
        hop_cpu0 = _tree_cpu(proc.pid) if proc else 0.0
        result, ops_cpu = run_ops_bench(config, concurrency, requests)
        hop_cpu = (_tree_cpu(proc.pid) - hop_cpu0) if proc else None
    finally:
        if proc is not None:
            kill_tree(proc.pid)
    return {"rate": result["req_per_s"], "p50": result["p50_s"] * 1000, "p99": result["p99_s"] * 1000,
            "hop_ms": hop_cpu / requests * 1000 if hop_cpu is not None else None, "ops_cpu": ops_cpu,
            "requests": requests, "errors": result["errors"]}


def _rounds(names: Sequence[str], tmp: Path, sims: list[SimServer], direct: Path, *, once: Sequence[str] = (),
            concurrency: int = CONCURRENCY, requests: int | None = None,
            ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, str]]:
    """THROUGHPUT_ROUNDS rounds of every row in turn (a row in `once` only in the first): (each row's figures per
    round, why a row has none)."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    missing: dict[str, str] = {}
    for round_ in range(THROUGHPUT_ROUNDS):
        for name in names:
            if name in missing or (name in once and round_ > 0):
                continue
            figures = _measure(name, tmp, sims, direct, concurrency, requests)
            if isinstance(figures, str):
                missing[name] = figures
            else:
                runs[name].append(figures)
    return runs, missing


def throughput(tmp: Path, sims: list[SimServer]) -> None:
    """THROUGHPUT_ROUNDS rounds, each measuring direct, the gateway and vLLM's router in turn (LiteLLM, slow, in
    the first only), so a drift of the machine's load touches every row alike; each cell is the median."""
    direct = _config(tmp / "direct.json", [s.port for s in sims])
    _, startup_cpu = run_ops_bench(direct, 1, 1)
    names = ("direct (ops bench)", "ops gateway", "vllm-router", "litellm proxy")
    runs, missing = _rounds(names, tmp, sims, direct, once=("litellm proxy",))
    base = statistics.median(r["rate"] for r in runs[names[0]])
    base_p50 = statistics.median(r["p50"] for r in runs[names[0]])
    base_p99 = statistics.median(r["p99"] for r in runs[names[0]])
    rows: list[list[object]] = []
    for name in names:
        if name in missing:
            rows.append([name, missing[name], *["-"] * 9])
            continue
        done = runs[name]
        rate, p50, p99 = (statistics.median(r[key] for r in done) for key in ("rate", "p50", "p99"))
        hop = [r["hop_ms"] for r in done if r["hop_ms"] is not None]
        client = statistics.median((r["ops_cpu"] - startup_cpu) / r["requests"] * 1000 for r in done)
        errors: dict[str, int] = {}
        for r in done:
            for kind, count in r["errors"].items():
                errors[kind] = errors.get(kind, 0) + count
        spread = f"{min(r['rate'] for r in done):,.0f}-{max(r['rate'] for r in done):,.0f}"
        rows.append([name, f"{rate:,.0f}", spread, f"{rate / base:.3f}", f"{p50:.0f}", f"{p99:.0f}",
                     f"{p50 - base_p50:+.0f}", f"{p99 - base_p99:+.0f}",
                     f"{statistics.median(hop):.3f}" if hop else "-", f"{client:.3f}", json.dumps(errors)])
    table(f"{REPLICAS} sims at {LATENCY_MS} ms, ops bench --concurrency {CONCURRENCY} ({REQUESTS:,} requests; "
          f"LiteLLM {LITELLM_REQUESTS:,}), medians of {THROUGHPUT_ROUNDS} interleaved rounds (LiteLLM: 1); bound "
          f"{CONCURRENCY / (LATENCY_MS / 1000):,.0f} req/s; load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores",
          ["path", "req/s", "range", "of direct", "p50 ms", "p99 ms", "added p50", "added p99", "hop CPU ms/req",
           "client CPU ms/req", "errors"], rows)


def latency(tmp: Path, sims: list[SimServer]) -> None:
    """What one hop adds to one call when nothing queues: concurrency 1, direct, the gateway and vLLM's router
    in turn over the rounds (the sims answer in a fixed 200 ms, so the difference is the hop)."""
    direct = _config(tmp / "direct.json", [s.port for s in sims])
    names = ("direct (ops bench)", "ops gateway", "vllm-router")
    runs, missing = _rounds(names, tmp, sims, direct, concurrency=1, requests=LATENCY_REQUESTS)
    base_p50 = statistics.median(r["p50"] for r in runs[names[0]])
    base_p99 = statistics.median(r["p99"] for r in runs[names[0]])
    rows: list[list[object]] = []
    for name in names:
        if name in missing:
            rows.append([name, missing[name], *["-"] * 4])
            continue
        p50, p99 = (statistics.median(r[key] for r in runs[name]) for key in ("p50", "p99"))
        rows.append([name, f"{p50:.1f}", f"{p99:.1f}", f"{p50 - base_p50:+.2f}", f"{p99 - base_p99:+.2f}"])
    table(f"one call at a time ({LATENCY_REQUESTS} requests, concurrency 1), medians of {THROUGHPUT_ROUNDS} "
          f"interleaved rounds: what the hop adds", ["path", "p50 ms", "p99 ms", "added p50", "added p99"], rows)


def _prefix(sims: list[SimServer]) -> tuple[float, float]:
    hits = queries = 0.0
    for sim in sims:
        metrics = sim.metrics()
        hits += metrics.get("vllm:prefix_cache_hits_total", 0.0)
        queries += metrics.get("vllm:prefix_cache_queries_total", 0.0)
    return hits, queries


async def _conversations(fleet: FleetClient, tag: str, with_session: bool) -> None:
    rules = " ".join(f"rule {i}: answer in the plain style asked for" for i in range(60))
    histories = {f"{tag}-s{i}": [{"role": "system", "content": f"Session {i} of {tag}. {rules}"},
                                 {"role": "user", "content": f"Session {i} ({tag}) opens with a question."}]
                 for i in range(SESSIONS)}
    for round_ in range(ROUNDS):
        async def turn(key: str, round_: int = round_) -> None:
            messages = histories[key]
            answer = await fleet.chat("m", messages, session=key if with_session else None, max_tokens=8,
                                      temperature=0)
            messages += [{"role": "assistant", "content": answer.content or ""},
                         {"role": "user", "content": f"Round {round_ + 1}: go on."}]
        order = list(histories)
        random.Random(round_).shuffle(order)  # not the same order each round: round robin would stick by accident
        await asyncio.gather(*(turn(key) for key in order))


def affinity(tmp: Path, sims: list[SimServer]) -> None:
    direct = _config(tmp / "direct.json", [s.port for s in sims])
    port = free_port()
    argv, health, _ = _hop_argv("ops gateway", tmp, sims, port) or ([], "", {})
    gateway = _start(argv, health, tmp / "gateway-affinity.log")
    via = _config(tmp / "via-gateway.json", [port])
    rows = []
    try:
        for label, config, mode, with_session in (
                ("ops engine, affinity on", direct, "session", True),
                # one URL (the gateway): "session" only makes the client send x-session-id; the gateway places
                ("ops gateway, x-session-id", via, "session", True),
                ("ops gateway, no header (first messages hashed)", via, "session", False),
                ("ops engine, affinity off", direct, "none", True)):
            routing = from_model_config(read_endpoints(config), source=str(config), name="bench")
            fleet = FleetClient(routing.with_affinity(mode))  # type: ignore[arg-type]
            before = _prefix(sims)
            started = time.perf_counter()
            asyncio.run(_run_and_close(fleet, label, with_session))
            elapsed = time.perf_counter() - started
            after = _prefix(sims)
            hits, queries = after[0] - before[0], after[1] - before[1]
            rows.append([label, f"{hits / queries:.3f}" if queries else "-", f"{queries:,.0f}", f"{elapsed:.1f}"])
    finally:
        kill_tree(gateway.pid)
    table(f"prefix-cache hit rate on the sims: {SESSIONS} sessions x {ROUNDS} rounds, each session's own system "
          "prompt (~600 tokens), all sessions in flight each round",
          ["route", "hit rate (tokens)", "prompt tokens", "wall s"], rows)


async def _run_and_close(fleet: FleetClient, tag: str, with_session: bool) -> None:
    try:
        await _conversations(fleet, tag.replace(" ", "_"), with_session)
    finally:
        await fleet.close()


def main() -> int:
    print(f"load average before: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()})")
    sims = [SimServer("m", args=["--latency-ms", str(LATENCY_MS)]) for _ in range(REPLICAS)]
    try:
        for sim in sims:
            sim.start()
        with tempfile.TemporaryDirectory() as folder:
            tmp = Path(folder)
            parts = os.environ.get("BENCH_GATEWAY_PARTS", "throughput,latency,affinity").split(",")
            if "throughput" in parts:
                throughput(tmp, sims)
            if "latency" in parts:
                latency(tmp, sims)
            if "affinity" in parts:
                affinity(tmp, sims)
    finally:
        for sim in sims:
            sim.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
