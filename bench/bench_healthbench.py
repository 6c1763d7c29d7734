"""HealthBench grading throughput: ops against the seeds' asyncio harness and OpenCompass's pattern.

The seeds' workload shape: the first 50 examples of the bundled synthetic set (539 rubric items),
responses given (`--responses`, so only the judge works), a sim judge of 3 replicas with 2 s mean
latency (+-10 % jitter) and 6 % invalid JSON. Each harness gets fresh judge replicas with the same
seeds, the same grader prompts (our template, the reference's rendering and judge settings) and
the reference's parsing:

1. ops: `ops eval healthbench --responses FILE --concurrency 50 --judge-concurrency 600`, every
   rubric item one judge call under the judge's own cap, invalid replies re-asked up to 3 attempts.
2. the seeds' async harness: asyncio, one AsyncOpenAI client per replica, a Semaphore(250) around
   each item's grading, invalid replies re-asked without bound.
3. OpenCompass's pattern: examples one after another; each example's items through a
   ThreadPoolExecutor of os.cpu_count() threads (sync OpenAI client), re-asked without bound.

Wall time is first judge request to last reply (ops: from its profile.jsonl; its whole process,
start-up included, is shown too). Judge calls are counted at the sim replicas. The bound is what
every call in flight at once allows: (1 + r) x 2 s, where r is the most re-asks any item needed in
the ops run. Goals: ops >= 10x the OpenCompass pattern and within 1.5x of the bound. Never asserts.
`BENCH_HB_LATENCY_MS` shortens the judge latency for a smoke run.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from orchestra_ops.evals.healthbench.dataset import render_conversation
from orchestra_ops.evals.healthbench.grading import JudgeSettings, grader_prompt, verdict_of
from orchestra_ops.evals.healthbench.scoring import aggregate, example_metrics
from orchestra_ops.evals.healthbench.suite import HealthBenchSuite
from orchestra_ops.services.simllm import replies

from bench.tables import table
from orchestra_ops.runner.templates import load_templates
from tests.simserver import SimServer

EXAMPLES = 50
REPLICAS = 3
LATENCY_MS = int(os.environ.get("BENCH_HB_LATENCY_MS", "2000"))
JITTER = 0.1
MALFORMED = 0.06
SEMAPHORE = 250
JUDGE = JudgeSettings(name="judge")

Row = dict[str, Any]
Graded = list[list[bool]]  # per example, per item


def _response(row: Row) -> str:
    return replies.expert_text(replies.answer_token(row["prompt"][0]["content"]))


def _prompts(rows: Sequence[Row]) -> list[list[str]]:
    suite = HealthBenchSuite()
    template = load_templates(suite.template_files, {}, suite.template_fields)["grader"]
    prompts = []
    for row in rows:
        conversation = render_conversation(row["prompt"], _response(row))
        prompts.append([grader_prompt(template, conversation, item) for item in row["rubrics"]])
    return prompts


def _judges() -> list[SimServer]:
    args = ["--latency-ms", str(LATENCY_MS), "--jitter", str(JITTER), "--malformed-rate", str(MALFORMED)]
    sims = [SimServer("judge", args=[*args, "--seed", str(i)]) for i in range(REPLICAS)]
    for sim in sims:
        sim.start()
    return sims


def _score(rows: Sequence[Row], graded: Graded) -> float | None:
    per = [example_metrics([{**item, "criteria_met": met} for item, met in zip(row["rubrics"], verdicts, strict=True)],
                           row["example_tags"])
           for row, verdicts in zip(rows, graded, strict=True)]
    value = aggregate(per, resamples=1).get("overall_score")
    return float(value) if value is not None else None


# 1. ops


def _ops(rows: Sequence[Row], sims: Sequence[SimServer], tmp: Path) -> dict[str, Any]:
    config = tmp / "judge.json"
    config.write_text(json.dumps({"judge": [{"ip_addr": "127.0.0.1", "port": s.port} for s in sims]}))
    responses = tmp / "responses.jsonl"
    responses.write_text("".join(json.dumps({"prompt_id": r["prompt_id"], "response": _response(r)}) + "\n"
                                 for r in rows))
    run_dir = tmp / "ops-run"
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "orchestra_ops", "eval", "healthbench", "--model-config", str(config),
                           "--run-dir", str(run_dir), "--limit", str(len(rows)), "--responses", str(responses),
                           "--concurrency", str(len(rows)), "--judge-concurrency", "600"],
                          capture_output=True, text=True, check=False, timeout=1800)
    process_s = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"ops eval healthbench failed ({proc.returncode}): {proc.stderr[-2000:]}")
    events = [json.loads(line) for line in (run_dir / "profile.jsonl").read_text().splitlines()]
    calls = [e for e in events if e.get("type") == "model_call"]
    span = max(e["start"] + e["latency"] for e in calls) - min(e["start"] for e in calls)
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    items = [i for r in records for i in r["rubric_items"]]
    scores = json.loads((run_dir / "scores.json").read_text())
    return {"wall_s": span, "process_s": process_s, "max_attempts": max(i["attempts"] for i in items),
            "grader_errors": sum(1 for i in items if i["criteria_met"] is None), "score": scores["score"]}


# 2. the seeds' async harness


def _async_harness(rows: Sequence[Row], prompts: list[list[str]], sims: Sequence[SimServer]) -> tuple[float, Graded]:
    import openai

    async def run() -> tuple[float, Graded]:
        clients = [openai.AsyncOpenAI(base_url=f"{s.base_url}/v1", api_key="EMPTY") for s in sims]
        sem = asyncio.Semaphore(SEMAPHORE)
        counter = iter(range(10**9))

        async def grade(prompt: str) -> bool:
            async with sem:
                while True:  # the reference re-asks without bound
                    client = clients[next(counter) % len(clients)]
                    resp = await client.chat.completions.create(model="judge", messages=JUDGE.messages(prompt),
                                                                **JUDGE.params())
                    verdict = verdict_of(resp.choices[0].message.content)
                    if verdict is not None:
                        return verdict[0]

        start = time.perf_counter()
        flat = await asyncio.gather(*(grade(p) for example in prompts for p in example))
        wall = time.perf_counter() - start
        for client in clients:
            await client.close()
        graded, at = [], 0
        for example in prompts:
            graded.append(list(flat[at:at + len(example)]))
            at += len(example)
        return wall, graded

    return asyncio.run(run())


# 3. OpenCompass's pattern


def _opencompass(prompts: list[list[str]], sims: Sequence[SimServer],
                 progress: Callable[[int], None]) -> tuple[float, Graded]:
    import itertools
    import threading

    import openai

    clients = [openai.OpenAI(base_url=f"{s.base_url}/v1", api_key="EMPTY") for s in sims]
    counter = itertools.count()
    lock = threading.Lock()

    def grade(prompt: str) -> bool:
        while True:  # OpenCompass re-asks without bound
            with lock:
                client = clients[next(counter) % len(clients)]
            resp = client.chat.completions.create(model="judge", messages=JUDGE.messages(prompt), **JUDGE.params())
            verdict = verdict_of(resp.choices[0].message.content)
            if verdict is not None:
                return verdict[0]

    graded: Graded = []
    start = time.perf_counter()
    for index, example in enumerate(prompts):  # examples one after another
        with ThreadPoolExecutor(max_workers=min(os.cpu_count() or 10, len(example))) as pool:
            graded.append(list(pool.map(grade, example)))
        progress(index + 1)
    return time.perf_counter() - start, graded


def _requests(sims: Sequence[SimServer]) -> int:
    return int(sum(s.metrics().get("sim_requests_total", 0.0) for s in sims))


def _with_judges(work: Callable[[list[SimServer]], Any]) -> tuple[Any, int]:
    sims = _judges()
    try:
        result = work(sims)
        return result, _requests(sims)
    finally:
        for sim in sims:
            sim.stop()


def main() -> int:
    print(f"load average before: {', '.join(f'{x:.2f}' for x in os.getloadavg())} (cores: {os.cpu_count()})")
    suite = HealthBenchSuite()
    rows = suite.load(Path(suite.default_dataset or ""), dedupe=False)[:EXAMPLES]
    prompts = _prompts(rows)
    n_items = sum(len(p) for p in prompts)
    latency_s = LATENCY_MS / 1000
    print(f"{len(rows)} examples, {n_items} rubric items; judge: {REPLICAS} sim replicas, {latency_s:g} s mean "
          f"latency (+-{JITTER:.0%}), {MALFORMED:.0%} invalid JSON")
    with tempfile.TemporaryDirectory() as tmp:
        ours, ours_calls = _with_judges(lambda sims: _ops(rows, sims, Path(tmp)))
    print(f"ops done: {ours['wall_s']:.1f} s", flush=True)
    (async_wall, async_graded), async_calls = _with_judges(lambda sims: _async_harness(rows, prompts, sims))
    print(f"async harness done: {async_wall:.1f} s", flush=True)

    def progress(done: int) -> None:
        if done % 10 == 0:
            print(f"  OpenCompass pattern: {done}/{len(prompts)} examples", flush=True)

    (oc_wall, oc_graded), oc_calls = _with_judges(lambda sims: _opencompass(prompts, sims, progress))
    bound = ours["max_attempts"] * latency_s  # one latency per attempt of the longest chain
    rows_out = []
    for name, wall, calls, errors, score in [
        ("ops (judge cap 600, 3 attempts)", ours["wall_s"], ours_calls, ours["grader_errors"], ours["score"]),
        (f"seeds' asyncio + Semaphore({SEMAPHORE})", async_wall, async_calls, 0, _score(rows, async_graded)),
        (f"OpenCompass: sequential, {os.cpu_count()} threads/example", oc_wall, oc_calls, 0,
         _score(rows, oc_graded)),
    ]:
        rows_out.append([name, f"{wall:.1f}", str(calls), f"{calls / wall:.2f}", f"{oc_wall / wall:.1f}x",
                         f"{wall / bound:.2f}", str(errors), f"{score:.4f}" if score is not None else "-"])
    table(f"HealthBench grading: {len(rows)} examples, {n_items} rubric items; bound {bound:.1f} s "
          f"= (1 + {ours['max_attempts'] - 1} re-asks) x {latency_s:g} s",
          ["harness", "wall s", "judge calls", "calls/s", "vs OpenCompass", "wall / bound", "grader errors",
           "score"], rows_out)
    speedup, of_bound = oc_wall / ours["wall_s"], ours["wall_s"] / bound
    print(f"  ops process, start-up and scoring included: {ours['process_s']:.1f} s")
    print(f"  ops is {speedup:.1f}x the OpenCompass pattern ({'meets' if speedup >= 10 else 'MISSES'} the 10x goal) "
          f"and {of_bound:.2f}x the bound ({'meets' if of_bound <= 1.5 else 'MISSES'} the 1.5x goal)")
    agree = sum(a == b for x, y in zip(async_graded, oc_graded, strict=True) for a, b in zip(x, y, strict=True))
    print(f"  the two baselines agree on {agree} of {n_items} verdicts (the sim judge is deterministic)")
    print(f"load average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
