"""Session affinity against real vLLM: two replicas of the prefill-sized model, affine vs least loaded.

Two CPU-build vLLM replicas (one core each) of `.tiny-model/prefill` (`make tiny-model`; OPS_PREFILL_MODEL
names another build of it), 256 MiB of KV cache each: every session in flight fits on either replica, so
the runs differ only in where their rounds go. A multi-round loop (tests/affinity_loop.py: 12 tasks x 6
rounds, +~200 tokens a round, 0.5-1.5 s in a tool between rounds, 6 tasks in flight) runs through the eval
engine's client twice on the same replicas, its prompts salted per run so neither run finds the other's
cache. The hit rates are vLLM's own counters (the runs' deltas).

What is asserted, and why the margin:
- affine: each task's calls all land on one replica, unless a move the pool reported took it elsewhere; its
  hits are >= 0.9 of the ideal (each round finding every whole block it shares with the round before, on
  the token ids vLLM's /tokenize gives);
- least loaded: with the tasks in their tools about as long as in a call, it sends at least a quarter
  of the rounds to the other replica than the round before (else the next-freed replica is often the
  one the task just left: an affinity by accident). Such a round finds at most what that replica served
  the task earlier, so it recomputes at least the ~216 tokens the previous round added: at least one
  whole 128-token block. Least loaded must hit less than affine by at least half of that floor,
  0.5 x 128 x (its rounds that changed replica) / (its prompt tokens). (Half: the affine run's own moves,
  and a reply whose tokens re-tokenize to the ids vLLM generated, can shift a block either way.)
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from orchestra_ops.client.routing import from_model_config
from orchestra_ops.fleet.prefix_counters import parse_prefix_counters
from tests.affinity_loop import LoopResult, LoopShape, block_ideal, run_loop
from tests.helpers import REPO
from tests.realvllm import VllmServer, vllm_missing

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1800)]  # two engines starting on 2 busy cores: minutes

PREFILL_MODEL = Path(os.environ.get("OPS_PREFILL_MODEL", REPO / ".tiny-model" / "prefill"))
SERVED = "prefill"
BLOCK = 128
ARGS = ("--max-model-len", "4096", "--dtype", "float32", "--enforce-eager", "--kv-cache-memory-bytes", "256M",
        "--enable-prompt-tokens-details", "--disable-uvicorn-access-log")
SHAPE = dict(tasks=12, min_rounds=6, max_rounds=6, system_words=300, problem_words=100, grow_words=190,
             max_tokens=4, tool_s=1.0, ignore_eos=True)


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[VllmServer]]:
    reason = vllm_missing() or (None if (PREFILL_MODEL / "config.json").is_file() else
                                f"no prefill-sized model at {PREFILL_MODEL} (make tiny-model builds it)")
    if reason:
        pytest.skip(reason)
    logs = tmp_path_factory.mktemp("vllm-affinity")
    servers = [VllmServer(SERVED, model_dir=PREFILL_MODEL, args=ARGS, core=core % (os.cpu_count() or 1), log_dir=logs,
                          ready_timeout=900)
               for core in (0, 1)]
    try:
        with ThreadPoolExecutor(2) as pool:  # both start at once, each pinned to its own core
            list(pool.map(VllmServer.start, servers))
        yield servers
    finally:
        for server in servers:
            server.stop()


def post(url: str, body: Any) -> Any:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as resp:
        return json.loads(resp.read())


def hits_and_queries(servers: list[VllmServer]) -> tuple[float, float]:
    counters = []
    for server in servers:
        with urllib.request.urlopen(f"{server.base_url}/metrics", timeout=30) as resp:
            parsed = parse_prefix_counters(resp.read().decode())
        assert parsed is not None
        counters.append(parsed)
    return sum(c.hits for c in counters), sum(c.queries for c in counters)


def run(servers: list[VllmServer], mode: str) -> tuple[LoopResult, float, float]:
    """(the loop's result, the hits, the prompt tokens) of one run, from vLLM's counters."""
    routing = from_model_config({SERVED: [{"ip_addr": "127.0.0.1", "port": s.port} for s in servers]},
                                source="test", name="vllm-affinity")
    before = hits_and_queries(servers)
    result = asyncio.run(run_loop(routing, SERVED, LoopShape(salt=f"{mode}-{os.getpid()}", **SHAPE),  # type: ignore[arg-type]
                                  6, mode))
    after = hits_and_queries(servers)
    return result, after[0] - before[0], after[1] - before[1]


def ideal(servers: list[VllmServer], result: LoopResult) -> int:
    url = f"{servers[0].base_url}/tokenize"
    return sum(block_ideal([post(url, {"model": SERVED, "messages": m, "add_generation_prompt": True})["tokens"]
                            for m in rounds], BLOCK) for rounds in result.prompts.values())


def test_affine_rounds_find_their_history_and_least_loaded_ones_do_not(replicas: list[VllmServer]) -> None:
    affine, hits, queries = run(replicas, "session")
    moved: dict[str, set[str]] = defaultdict(set)
    for move in affine.moves:
        moved[move.session.rsplit("-task-", 1)[1]].update((move.source, move.dest))
    for task, where in affine.placements.items():
        assert len(set(where)) == 1 or set(where) == moved[str(task)], (task, where)
    assert hits >= 0.9 * ideal(replicas, affine), (hits, ideal(replicas, affine))

    scattered, hits_none, queries_none = run(replicas, "none")
    assert scattered.moves == []
    changed = sum(a != b for rounds in scattered.placements.values() for a, b in itertools.pairwise(rounds))
    assert changed >= 0.25 * sum(len(r) - 1 for r in scattered.placements.values())  # least loaded scatters
    floor = 0.5 * BLOCK * changed / queries_none
    assert hits / queries - hits_none / queries_none >= floor, (hits / queries, hits_none / queries_none, floor)
