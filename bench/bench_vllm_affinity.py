"""Session affinity on real vLLM: 2 replicas of the prefill-sized model, least loaded vs affine (issue 26, bench 2).

`ops up` of a copy of topologies/vllm_cpu_prefill.yaml (free ports, absolute paths): two CPU-build vLLM
replicas, one core each, prefix caching on, a 256 MiB KV cache each (65,536 tokens: every session in flight
fits on either replica). The loop (tests/affinity_loop.py): 40 tasks x 8 rounds, each round +~200 tokens
(a tool result of 190 words, each about one token of the model's tokenizer) on a ~430-token start, 16 tasks
in flight, 4 output tokens a call (ignore_eos, temperature 0: the calls are prefill, what affinity saves),
1-3 s in the tool between rounds (as long as a call or two here: shorter, and least loaded often sends a
task back to the replica it just left, whose slot its own call freed; `same replica` shows how often). Both
modes run on the same replicas with prompts salted per run (the salt opens the system message), so neither
finds the other's cache; they alternate (least loaded first, then affine) ROUNDS times.

Columns: the hit rate from vLLM's own counters (`vllm:prefix_cache_hits_total / ..._queries_total`, the
run's deltas) and its share of the ideal (each task's round k finding the blocks its prompt shares with round
k-1's, counted on the token ids vLLM's /tokenize gives: whole 128-token blocks, never the last token's),
wall time, p50/p99 call latency, calls per replica max/mean, moves, the share of rounds on the replica of
the task's round before. Goals: hit rate >= 0.9 of the ideal, wall >= 1.2x faster, max/mean <= 1.25.
CPU-heavy: run it when the machine is quiet (the load average is printed). Never asserts; returns 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from bench.tables import table
from bench.vllm_fleet import VLLM, down, up
from orchestra_ops.client.routing import from_model_config
from orchestra_ops.fleet.prefix_counters import PrefixCounters, parse_prefix_counters
from tests.affinity_loop import LoopResult, LoopShape, block_ideal, run_loop
from tests.helpers import REPO, free_port_block

NAME = "bench-vllm-affinity"
MODEL_DIR = Path(os.environ.get("OPS_PREFILL_MODEL", REPO / ".tiny-model" / "prefill"))
SERVED = "prefill"
BLOCK = 128
ROUNDS = int(os.environ.get("BENCH_VLLM_AFFINITY_ROUNDS", "2"))
CONCURRENCY = 16
SHAPE = dict(tasks=40, min_rounds=8, max_rounds=8, system_words=300, problem_words=100, grow_words=190,
             max_tokens=4, tool_s=2.0, ignore_eos=True)


def write_topology(directory: Path) -> tuple[Path, list[int]]:
    doc = yaml.safe_load((REPO / "topologies" / "vllm_cpu_prefill.yaml").read_text())
    doc["name"] = NAME
    doc["nodes"]["cpu"]["vllm_command"] = [str(VLLM)]
    model = doc["models"]["prefill"]
    port = free_port_block(2)
    model.update(model=str(MODEL_DIR), tokenizer=str(MODEL_DIR), port=port)
    path = directory / f"{NAME}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path, [port, port + 1]


def http(url: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as resp:
        text = resp.read().decode()
    return text if body is None else json.loads(text)


def counters(ports: list[int]) -> list[PrefixCounters]:
    out = []
    for port in ports:
        parsed = parse_prefix_counters(http(f"http://127.0.0.1:{port}/metrics"))
        assert parsed is not None, f"127.0.0.1:{port}/metrics has no prefix-cache counters"
        out.append(parsed)
    return out


def ideal_hits(result: LoopResult, port: int) -> int:
    """Each round k > 0 finds the whole blocks its token ids (vLLM's /tokenize) share with round k-1's."""
    return sum(block_ideal([http(f"http://127.0.0.1:{port}/tokenize", {"model": SERVED, "messages": messages,
                                                                      "add_generation_prompt": True})["tokens"]
                            for messages in rounds], BLOCK) for rounds in result.prompts.values())


def run_mode(mode: str, ports: list[int], salt: str) -> list[Any]:
    routing = from_model_config({SERVED: [{"ip_addr": "127.0.0.1", "port": p} for p in ports]}, source="bench",
                                name=NAME)
    shape = LoopShape(salt=salt, **SHAPE)  # type: ignore[arg-type]
    before = counters(ports)
    result = asyncio.run(run_loop(routing, SERVED, shape, CONCURRENCY, mode))
    after = counters(ports)
    hits = sum(a.hits - b.hits for a, b in zip(after, before, strict=True))
    queries = sum(a.queries - b.queries for a, b in zip(after, before, strict=True))
    ideal = ideal_hits(result, ports[0])
    return ["least loaded" if mode == "none" else "affine", f"{100 * hits / queries:.1f}%", f"{hits / ideal:.3f}",
            f"{result.wall_s:.1f}", f"{result.percentile(0.5):.3f}", f"{result.percentile(0.99):.3f}",
            max(result.calls.values()), f"{sum(result.calls.values()) / 2:.0f}", f"{result.max_over_mean(2):.3f}",
            len(result.moves), f"{100 * result.stayed:.0f}%"]


def main() -> int:
    if not (VLLM.is_file() and (MODEL_DIR / "config.json").is_file()):
        print(f"skipped: needs {VLLM} and {MODEL_DIR} (make setup tiny-model)")
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-vllm-affinity-") as tmp:
        work = Path(tmp)
        topology, ports = write_topology(work)
        elapsed, _ = up(work, topology)
        print(f"ops up: 2 replicas of {MODEL_DIR} READY in {elapsed:.0f} s", flush=True)
        try:
            rows, walls = [], {"none": [], "session": []}
            for attempt in range(ROUNDS):
                for mode in ("none", "session"):
                    print(f"load average {os.getloadavg()[0]:.2f}: round {attempt + 1}, {mode}", flush=True)
                    row = run_mode(mode, ports, salt=f"{mode}-{attempt}-{os.getpid()}")
                    rows.append([attempt + 1, *row])
                    walls[mode].append(float(row[3]))
        finally:
            down(work, NAME)
    table("session affinity on real vLLM: 2 replicas (one core each), 40 tasks x 8 rounds",
          ["round", "routing", "hit rate", "of ideal", "wall s", "p50 s", "p99 s", "calls max", "calls mean",
           "max/mean", "moves", "same replica"], rows)
    ratios = [n / s for n, s in zip(walls["none"], walls["session"], strict=True)]
    print("\naffine vs least loaded, wall: " + ", ".join(f"{r:.2f}x" for r in ratios) + " (goal >= 1.2x)")
    return 0
