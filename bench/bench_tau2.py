"""`ops eval tau2` at scale: a few hundred simulations of the synthetic domain over sims, against
τ²-bench's own runner pattern and against the bound.

Latencies (fixed; `BENCH_TAU2_JITTER=0.5` spreads them uniformly ±50 %) are a τ²-bench run's shape scaled down 10x
(`BENCH_TAU2_SCALE`): the agent (an 8B orchestrator on vLLM, about 1.5 s a turn) 150 ms, the user
simulator (gpt-5, about 6 s a turn) 600 ms, the judge 200 ms. These per-turn figures are our
assumption for the shape (the reference gives no per-turn latencies for τ²-bench runs). Scaled down
further (100x), this 2-core machine's CPU, shared by ops and three sim processes answering 308
conversations at once, becomes the bottleneck, and the table then measures the sims, not the harness.
Then:

1. ops (in this process) at --concurrency = the number of simulations: wall time against the bound
   max(longest simulation's own chain of calls, total work / concurrency), each call counted at its
   sim's nominal latency; goal >= 0.9. Without jitter this bound is exact. With jitter it is only a
   lower estimate: the slowest simulation's real chain is longer than its nominal one (the sim draws
   each request's jitter by arrival order, so the real chain cannot be recomputed here).
2. τ²-bench's runner pattern: a ThreadPoolExecutor of 3 (its default) and of 30 (its design note
   puts one process's ceiling near 10), each thread running one simulation at a time with blocking
   HTTP calls, the same loop and reward code; goal: ops >= 10x the pool of 3.

Everything shares this machine's cores; the load average is printed. Never asserts; returns 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from bench.clock import RunClock
from bench.tables import table
from orchestra_ops.api import EvalOptions, evaluate
from orchestra_ops.api.session import check_eval, registered
from orchestra_ops.client.chat import ChatResult
from tests.simserver import SimServer

TRIALS = int(os.environ.get("BENCH_TAU2_TRIALS", "14"))  # x 22 tasks = 308 simulations
SCALE = float(os.environ.get("BENCH_TAU2_SCALE", "10"))  # the reference's per-turn latencies divided by this
POOLS = tuple(int(n) for n in os.environ.get("BENCH_TAU2_POOLS", "3,30").split(",") if n)
MAX_STEPS = 30
REAL_MS = {"orchestrator": 1500, "user": 6000, "judge": 2000}  # per turn, our assumption (see the doc)
SIMS = {role: (round(ms / SCALE), role) for role, ms in REAL_MS.items()}  # role -> (latency ms, model = role)
JITTER = float(os.environ.get("BENCH_TAU2_JITTER", "0"))


class BlockingContext:
    """τ²-bench's pattern: one blocking chat-completions call at a time per simulation (its thread)."""

    task_id = "baseline"
    previous = None

    def __init__(self, client: httpx.Client, urls: dict[str, str], models: dict[str, str]) -> None:
        self.client, self.urls, self.models = client, urls, models

    async def chat(self, name: str, messages: Sequence[Any], **params: Any) -> ChatResult:
        start = time.monotonic()
        body = {"model": self.models[name], "messages": list(messages), **params}
        response = self.client.post(f"{self.urls[name]}/v1/chat/completions", json=body, timeout=120)
        response.raise_for_status()
        data = response.json()
        message = data["choices"][0]["message"]
        usage = data.get("usage") or {}
        return ChatResult(message.get("content"), message, data["choices"][0].get("finish_reason"),
                          usage.get("prompt_tokens"), usage.get("completion_tokens"), self.urls[name], 1,
                          time.monotonic() - start)

    def record(self, event: Any) -> None:
        return None


def _ops_run(work: Path, config: Path, concurrency: int) -> dict[str, Any]:
    run_dir = work / "run"
    options = EvalOptions(run_dir=str(run_dir), concurrency=concurrency, model_config=str(config),
                          progress_interval_s=30, suite_options={"trials": TRIALS, "max_steps": MAX_STEPS})
    suite = registered("tau2")  # the baseline then runs the same suite object, prepared by this run
    clock = RunClock()  # the run alone, as evaluate runs it (prepare and the lock before it are not timed)
    result = evaluate(options, suite, display=clock, analyze=False)
    chains: dict[str, float] = defaultdict(float)  # each simulation's calls at the sims' nominal latency
    measured: dict[str, float] = defaultdict(float)
    for line in (run_dir / "profile.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["type"] == "model_call":
            chains[event["task"]] += SIMS[event["role"]][0] / 1000
            measured[event["task"]] += event["latency"]
    work_s = sum(chains.values())
    return {"wall_s": clock.wall_s, "cpu_s": clock.cpu_s, "ok": result.ok, "units": result.units,
            "avg_reward": (result.scores or {}).get("avg_reward"), "work_s": work_s,
            "longest_s": max(chains.values()), "bound_s": max(max(chains.values()), work_s / concurrency),
            "measured_work_s": sum(measured.values()), "suite": suite}


def _pool_run(suite: Any, samples: list[dict[str, Any]], urls: dict[str, str], models: dict[str, str],
              workers: int) -> dict[str, Any]:
    def one(sample: dict[str, Any]) -> float:
        with httpx.Client() as client:
            fields = asyncio.run(suite.run(sample, BlockingContext(client, urls, models)))
        return float(fields["reward"])

    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        rewards = list(pool.map(one, samples))
    return {"wall_s": time.monotonic() - start, "avg_reward": round(sum(rewards) / len(rewards), 6)}


def main() -> int:
    print(f"load average before: {os.getloadavg()} (cores: {os.cpu_count()})")
    work = Path(tempfile.mkdtemp(prefix="bench-tau2-"))
    sims: dict[str, SimServer] = {}
    try:
        for role, (latency, model) in SIMS.items():
            sims[role] = SimServer(model, args=["--latency-ms", str(latency), "--jitter", str(JITTER)],
                                   log_dir=work).start()
        config = work / "model_config.json"
        config.write_text(json.dumps({role: [{"ip_addr": "127.0.0.1", "port": sim.port}]
                                      for role, sim in sims.items()}))
        probe = check_eval(EvalOptions(run_dir=str(work / "probe"), model_config=str(config),
                                       suite_options={"trials": TRIALS, "max_steps": MAX_STEPS}), "tau2")
        n = len(probe.samples)  # the run's units (the same options make the same units), the baseline's too
        ours = _ops_run(work, config, n)
        print(f"load average between: {os.getloadavg()}")
        urls = {role: sim.base_url for role, sim in sims.items()}
        models = {role: sim.model for role, sim in sims.items()}
        suite = ours["suite"]
        suite.trajectories = work / "baseline-trajectories"
        pools = {workers: _pool_run(suite, probe.samples, urls, models, workers) for workers in POOLS}
    finally:
        for sim in sims.values():
            sim.stop()
        if os.environ.get("BENCH_TAU2_KEEP"):
            print(f"work dir (kept): {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    rows = [[f"ops (concurrency {n})", f"{ours['wall_s']:.2f}", f"{ours['bound_s']:.2f}",
             f"{ours['bound_s'] / ours['wall_s']:.2f}", f"{n / ours['wall_s']:.1f}", f"{ours['avg_reward']}", "1.0x"]]
    for workers, result in pools.items():
        bound = max(ours["longest_s"], ours["work_s"] / workers)
        rows.append([f"τ²-bench pattern (threads, {workers})", f"{result['wall_s']:.2f}", f"{bound:.2f}",
                     f"{bound / result['wall_s']:.2f}", f"{n / result['wall_s']:.1f}", f"{result['avg_reward']}",
                     f"{result['wall_s'] / ours['wall_s']:.1f}x"])
    table(f"ops eval tau2: {n} simulations of the synthetic domain ({TRIALS} trials, max steps {MAX_STEPS}); "
          f"sims: agent {SIMS['orchestrator'][0]} ms, user {SIMS['user'][0]} ms, judge {SIMS['judge'][0]} ms "
          f"(the reference's per-turn latencies / {SCALE:g}, jitter {JITTER})",
          ["harness", "wall s", "bound s", "bound / wall", "sims/s", "avg reward", "ops faster by"], rows)
    ratio = ours["bound_s"] / ours["wall_s"]
    print(f"  bound = max(longest simulation's chain {ours['longest_s']:.2f} s, total work {ours['work_s']:.1f} s / "
          f"concurrency), at the sims' nominal latencies (measured under this load: {ours['measured_work_s']:.1f} s "
          f"of calls in all); goal bound/wall >= 0.9 {'met' if ratio >= 0.9 else 'MISSED'}; "
          f"ops CPU {ours['cpu_s']:.1f} s")
    if 3 in pools:
        speedup = pools[3]["wall_s"] / ours["wall_s"]
        print(f"  vs threads of 3: {speedup:.1f}x (goal >= 10x {'met' if speedup >= 10 else 'MISSED'})")
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
