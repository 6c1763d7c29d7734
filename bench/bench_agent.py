"""`ops eval hle` at scale: 2,000 tasks over sims with the seed run's latency shape scaled down 100x.

Sims (means, uniform jitter around them): orchestrator 800 ms (x4 replicas), answer 330 ms (x2),
reasoner 80 ms (x2), search expert 25 ms, judge 20 ms; retrieval 55 ms (a stand-in server, see
retrieval_standin.py); 1-3 tool rounds per task, then the answer round; the reasoner's programs
run in the real sandbox. Then:

1. ops (in this process) at --concurrency 512: wall time against the bound
   max(longest task's own chain, total work / 512), where a task's chain is its model calls'
   nominal latencies plus its retrieval and measured code runs; goal >= 0.9. CPU seconds per task
   of ops itself (this process, not the sims or the programs it ran).
2. The same tasks through the original harness's pattern (agent_baseline.py) at concurrency 64.

Everything shares this machine's cores (2 here): the load average is printed before and after.
Never asserts; returns 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from orchestra_ops.evals.bundled import packaged

from bench.agent_baseline import Baseline, run_all
from bench.clock import RunClock, busy_jiffies, busy_share
from bench.tables import table
from orchestra_ops.api import EvalOptions, evaluate
from tests.helpers import free_port, kill_tree, wait_port
from tests.simserver import SimServer

TASKS = int(os.environ.get("BENCH_AGENT_TASKS", "2000"))
CONCURRENCY = 512
BASELINE_CONCURRENCY = 64
EXEC_WORKERS = 8
# model key -> (mean latency ms, jitter, replicas)
SIMS = {"orchestrator": (800, 0.9, 4), "answer": (330, 0.5, 2), "reasoner": (80, 0.5, 2), "search": (25, 0.5, 1),
        "judge": (20, 0.5, 1)}
RETRIEVAL_MS = 55
CORPUS = Path(packaged("agent/data/agent_corpus.jsonl"))
TOOL_MODEL = {"search": "search", "enhance_reasoning": "reasoner", "answer": "answer"}


def _dataset(path: Path) -> list[dict[str, Any]]:
    rows = [{"id": f"bench-{i:05d}", "question": f"Benchmark question {i}: which value does the record give?",
             "answer": "42"} for i in range(TASKS)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def _bound(run_dir: Path) -> dict[str, float]:
    """Each task's chain: nominal sim latency of each model call + its retrieval and code runs."""
    chains: dict[str, float] = defaultdict(float)
    measured: dict[str, float] = defaultdict(float)
    for line in (run_dir / "profile.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["type"] == "model_call":
            chains[event["task"]] += SIMS[event["model"]][0] / 1000
            measured[event["task"]] += event["latency"]
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        for call in record.get("calls", []):
            extra = (call.get("retrieval_ms", 0) + call.get("exec_ms", 0)) / 1000
            chains[record["id"]] += extra
            measured[record["id"]] += extra
    work = sum(chains.values())
    return {"work_s": work, "longest_s": max(measured.values()), "longest_nominal_s": max(chains.values()),
            "bound_s": max(max(measured.values()), work / CONCURRENCY)}


def _ops_run(work: Path, config: Path, data: Path, python: str) -> dict[str, Any]:
    run_dir = work / "run"
    options = EvalOptions(dataset=str(data), run_dir=str(run_dir), concurrency=CONCURRENCY,
                          model_config=str(config), exec_workers=EXEC_WORKERS, progress_interval_s=30,
                          suite_options={"exec_python": python})
    clock = RunClock()  # the run alone, as evaluate runs it (prepare and the lock before it are not timed)
    result = evaluate(options, "hle", display=clock, analyze=False)
    return {"wall_s": clock.wall_s, "cpu_s": clock.cpu_s, "ok": result.ok,
            "correct": (result.scores or {}).get("correct"), "busy": clock.busy, **_bound(run_dir)}


def _baseline_run(endpoints: dict[str, list[tuple[str, int]]], rows: list[dict[str, Any]], python: str
                  ) -> dict[str, Any]:
    from orchestra_ops.evals.agent.hle import HleSuite
    from orchestra_ops.evals.agent.suite import packaged_templates

    from orchestra_ops.runner.templates import load_templates

    templates = load_templates(packaged_templates(dict(HleSuite.template_files)), {})
    tools = json.loads(templates["tools"].text)
    harness = Baseline(endpoints, templates, tools, python)
    cpu = time.process_time()
    busy = busy_jiffies()
    start = time.monotonic()
    results = asyncio.run(run_all([(harness.run_single, r) for r in rows], concurrency=BASELINE_CONCURRENCY))
    wall = time.monotonic() - start
    shutil.rmtree(harness.workdir, ignore_errors=True)
    done = [r for r in results if isinstance(r, dict)]
    return {"wall_s": wall, "cpu_s": time.process_time() - cpu, "ok": len(done),
            "busy": busy_share(busy, busy_jiffies()), "correct": sum(1 for r in done if r["correct"]),
            "errors": len(results) - len(done)}


def _resume_times(lines: int = 50_000) -> tuple[list[float], int]:
    """Open a results.jsonl of `lines` agent records (3 tool calls each) and compute what is left to run."""
    from orchestra_ops.runner.prepare import select_tasks
    from orchestra_ops.runner.results import ResultsStore

    call = {"round": 0, "tool": "search", "alias": "search-2", "model": "openai/gpt-oss-20b",
            "replica": "10.0.0.12:1840", "status": "ok", "expert_ms": 2512.331, "retrieval_ms": 204.118,
            "documents": 50}
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        with open(Path(tmp) / "results.jsonl", "w", encoding="utf-8") as handle:
            for i in range(lines):
                record = {"id": f"{i:024x}", "status": "ok", "correct": i % 3 == 0, "pred": "42", "grade": "judge",
                          "rounds": 3, "answered": True, "invalid": {}, "calls": [call, {**call, "round": 1},
                                                                                   {**call, "round": 2}],
                          "trajectory": f"trajectories/{i:024x}.json", "elapsed": 83.2}
                handle.write(json.dumps(record) + "\n")
        size = (Path(tmp) / "results.jsonl").stat().st_size
        samples = [{"id": f"{i:024x}"} for i in range(lines + 1_000)]
        for _ in range(3):
            start = time.perf_counter()
            left = select_tasks(samples, ResultsStore(tmp), resume=True, retry_failed=False)
            times.append(time.perf_counter() - start)
            assert len(left) == 1_000
    return times, size


def main() -> int:
    print(f"load average before: {os.getloadavg()} (cores: {os.cpu_count()}); {TASKS} tasks")
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    sims: list[SimServer] = []
    endpoints: dict[str, list[tuple[str, int]]] = {}
    work = Path(tempfile.mkdtemp(prefix="bench-agent-"))
    if os.environ.get("BENCH_AGENT_KEEP"):
        print(f"work dir (kept): {work}")
    retrieval_port = free_port()
    standin = subprocess.Popen([sys.executable, "-m", "bench.retrieval_standin", str(retrieval_port),
                                str(RETRIEVAL_MS), str(CORPUS)])
    try:
        for model, (latency, jitter, replicas) in SIMS.items():
            for seed in range(replicas):
                sim = SimServer(model, args=["--latency-ms", str(latency), "--jitter", str(jitter), "--seed",
                                             str(seed)], log_dir=work)
                sims.append(sim.start())
                endpoints.setdefault(model, []).append(("127.0.0.1", sim.port))
        wait_port(retrieval_port)
        endpoints["retrieval"] = [("127.0.0.1", retrieval_port)]
        config = work / "model_config.json"
        config.write_text(json.dumps({k: [{"ip_addr": h, "port": p} for h, p in v] for k, v in endpoints.items()}))
        rows = _dataset(work / "tasks.jsonl")
        ours = _ops_run(work, config, work / "tasks.jsonl", python)
        print(f"load average between: {os.getloadavg()}")
        theirs = _baseline_run(endpoints, rows, python)
    finally:
        for sim in sims:
            sim.stop()
        kill_tree(standin.pid)
        if not os.environ.get("BENCH_AGENT_KEEP"):
            shutil.rmtree(work, ignore_errors=True)
    bound = ours["bound_s"]
    their_bound = max(ours["longest_nominal_s"], ours["work_s"] / BASELINE_CONCURRENCY)
    table(f"ops eval hle: {TASKS} tasks; sims at the seed run's latencies / 100; programs run by {python} "
          f"(ops: {EXEC_WORKERS} sandbox workers)",
          ["harness", "wall s", "bound s", "bound / wall", "tasks/s", "ok", "correct", "CPU/task", "CPUs busy"],
          [[f"ops (concurrency {CONCURRENCY})", f"{ours['wall_s']:.1f}", f"{bound:.1f}",
            f"{bound / ours['wall_s']:.2f}", f"{TASKS / ours['wall_s']:.1f}", str(ours["ok"]), str(ours["correct"]),
            f"{ours['cpu_s'] / TASKS * 1000:.1f} ms", f"{100 * ours['busy']:.0f}%"],
           [f"original pattern (threads, concurrency {BASELINE_CONCURRENCY})", f"{theirs['wall_s']:.1f}",
            f"{their_bound:.1f}", f"{their_bound / theirs['wall_s']:.2f}", f"{TASKS / theirs['wall_s']:.1f}",
            str(theirs["ok"]), str(theirs["correct"]), f"{theirs['cpu_s'] / TASKS * 1000:.1f} ms",
            f"{100 * theirs['busy']:.0f}%"]])
    print(f"  ops bound = max(longest chain {ours['longest_s']:.2f} s (nominal {ours['longest_nominal_s']:.2f} s), "
          f"total work {ours['work_s']:.0f} s / {CONCURRENCY} = {ours['work_s'] / CONCURRENCY:.2f} s); goal bound/wall "
          f">= 0.9 {'met' if bound / ours['wall_s'] >= 0.9 else 'MISSED'}")
    print(f"  ops / original pattern: {theirs['wall_s'] / ours['wall_s']:.1f}x faster; ops CPU {ours['cpu_s']:.1f} s "
          f"for {TASKS} tasks (CPU/task: this process only, not the sims or the programs it ran)")
    times, size = _resume_times()
    table(f"resume: open a 50,000-line results.jsonl of agent records ({size / 1e6:.1f} MB) and pick the tasks left",
          ["runs", "best s", "worst s"], [[str(len(times)), f"{min(times):.3f}", f"{max(times):.3f}"]])
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
