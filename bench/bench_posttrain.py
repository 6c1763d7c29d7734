"""`ops posttrain` of one adapter on gsm8k + mmlu + bbh at the real sets' sizes, against the bound and
OpenCompass's request pattern.

Datasets (synthetic, shaped like the suites' bundled sets, scaled to the real test sets): gsm8k
1,319 problems; mmlu 14,042 questions over its 57 subjects (spread evenly: 246 or 247 per subject;
the real per-subject sizes differ, the total is the real one); bbh 6,511 items over its 27 subsets at
the real BBH per-subset sizes (OpenCompass's bbh/<subset>.json test files: 250 each, but
causal_judgement 187, penguins_in_a_table 146, snarks 178), items written by the bundled set's
generator (benchmark_synthetic.bbh_example: multiple-choice items with 3-5 options, free-form yes/no,
true/false, valid/invalid or number items) and prompted with the bundled synthetic few-shot examples
(templates/bbh_hints, about 0.6 KB a subset; the real lib_prompt CoT examples are several KB, so a real
bbh request carries more bytes than these, which the sims' fixed 200 ms does not charge for).
Base and adapter: 2 x 21,872 = 43,744 requests.

Fleet: a topology of 2 simulated replicas (`engine: sim`, 200 ms a request, `runtime_lora: true`),
brought up and down by the call itself (`--up --down`); the adapter is loaded into both at runtime.

1. `ops posttrain --datasets gsm8k,mmlu,bbh` (the library call the CLI makes, in process) at concurrency
   128 and 256. The bound is total calls / capacity, capacity = units in flight / 0.2 s (the sims take
   any number at once, so the in-flight cap is the client's). Wall time is reported for the eval alone
   (first request to last answer, from profile.jsonl) and end to end (up, load, eval, scoring, unload,
   down).
2. OpenCompass's request pattern at its defaults (OpenAISDK query_per_second 1, batch_size 1; one model
   after the other; the token bucket and per-batch thread pool of bench_opencompass.py), measured on
   a slice and projected to all 43,744 requests (it is rate-limited, so the rate is steady). The slice
   takes gsm8k, mmlu and bbh prompts in turn: at qps 1 each request waits for its token (1 s) and a
   200 ms answer fits inside that wait, so a request's shape does not change the rate; the bbh-shaped
   ones are measured rather than assumed.
The load average is printed before and after: client and servers share this machine's cores.
Never asserts; returns 0.
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from orchestra_ops.evals.opencompass import bbh, mmlu_data
from orchestra_ops.services.simllm.opencompass_rules import gsm8k_truth, mmlu_truth
from orchestra_ops.services.simllm.opencompass_synthetic import bbh_example, write_bbh

from bench.bench_opencompass import _opencompass
from bench.tables import table
from tests.adapters import make_adapter
from tests.helpers import free_port_block
from tests.simserver import SimServer

GSM8K = 1_319
MMLU = 14_042
# the real BBH test files' sizes (OpenCompass's data/BBH/data/<subset>.json): 250 each but these three
BBH_SIZES = {subset: {"causal_judgement": 187, "penguins_in_a_table": 146, "snarks": 178}.get(subset, 250)
             for subset in bbh.SUBSETS}
BBH = sum(BBH_SIZES.values())  # 6,511
DATASETS = ("gsm8k", "mmlu", "bbh")
LATENCY_MS = 200
REPLICAS = 2
CONCURRENCY = (128, 256)
OC_PER_MODEL = 9  # requests per model measured at OpenCompass's defaults (1 request/s): 3 of each dataset
MODELS = ("base", "ft")


def _datasets(root: Path) -> Path:
    (root / "gsm8k").mkdir(parents=True)
    with open(root / "gsm8k" / "test.jsonl", "w") as handle:
        for i in range(GSM8K):
            q = (f"Bench problem {i}: a warehouse receives crates every morning and ships some every evening. "
                 "How many crates are in the warehouse at the end of the month?")
            handle.write(json.dumps({"question": q, "answer": f"Steps.\n#### {gsm8k_truth(q)}"}) + "\n")
    subjects = [s for _, group in mmlu_data.GROUPS[:-1] for s in group]
    (root / "mmlu" / "test").mkdir(parents=True)
    for n, subject in enumerate(subjects):
        size = MMLU // len(subjects) + (1 if n < MMLU % len(subjects) else 0)
        with open(root / "mmlu" / "test" / f"{subject}_test.csv", "w", newline="") as handle:
            writer = csv.writer(handle)
            for i in range(size):
                q = f"Bench {subject} question {i}: which option holds?"
                writer.writerow([q, "first", "second", "third", "fourth", mmlu_truth(q)])
    write_bbh(root / "bbh", {subset: [bbh_example(subset, i, subset in bbh.MULTIPLE_CHOICE) for i in range(size)]
                             for subset, size in BBH_SIZES.items()})
    return root


def _topology(path: Path) -> Path:
    port = free_port_block(REPLICAS)
    path.write_text(yaml.safe_dump({
        "name": "bench-pt", "backend": "local", "defaults": {"ulimit_nofile": 16384, "ready_timeout_s": 120},
        "nodes": {"cpu": {"host": "localhost", "gpus": 0}},
        "models": {"base": {"model": "sim/base", "engine": "sim", "node": "cpu", "replicas": REPLICAS,
                            "gpus_per_replica": 0, "port": port, "runtime_lora": True,
                            "sim": {"latency_ms": LATENCY_MS}}}}))
    return path


def _span(run_dir: Path) -> tuple[float, int]:
    first, last, calls = float("inf"), 0.0, 0
    with open(run_dir / "profile.jsonl") as handle:
        for line in handle:
            event = json.loads(line)
            if event.get("type") == "model_call":
                calls += 1
                first, last = min(first, event["start"]), max(last, event["start"] + event["latency"])
    return last - first, calls


def _posttrain(root: Path, data: Path, adapter: Path, concurrency: int) -> dict[str, Any]:
    from orchestra_ops.api import posttrain

    topology = _topology(root / f"topology-{concurrency}.yaml")
    run_dir = root / f"run-{concurrency}"
    start = time.perf_counter()
    result = posttrain(topology=str(topology), model="base", adapter=f"ft={adapter}", datasets=",".join(DATASETS),
                       up=True, down=True, concurrency=concurrency, dataset_root=str(data), run_dir=str(run_dir),
                       timeout_s=3600)
    total = time.perf_counter() - start
    eval_s, calls = _span(run_dir)
    return {"calls": calls, "eval_s": eval_s, "total_s": total, "verdict": result["verdict"],
            "deltas": {name: result["datasets"][name]["delta"] for name in DATASETS}}


def _oc_prompts(data: Path, per_dataset: int) -> list[list[dict[str, str]]]:
    """The first `per_dataset` prompts of each suite as `ops` sends them, taken gsm8k, mmlu, bbh in turn."""
    from orchestra_ops.evals.opencompass.bbh import BbhSuite
    from orchestra_ops.evals.opencompass.gsm8k import Gsm8kSuite
    from orchestra_ops.evals.opencompass.mmlu import MmluSuite

    from orchestra_ops.runner.templates import load_templates

    per_suite = []
    suite: Any
    for name, suite in zip(DATASETS, (Gsm8kSuite(), MmluSuite(), BbhSuite()), strict=True):
        suite.templates = dict(load_templates(suite.template_files, {}))
        suite.check({})
        samples = suite.load(data / name, dedupe=False)[:per_dataset]
        per_suite.append([suite.messages({**s, "model": "sim/base"}) for s in samples])
    return [prompts[i] for i in range(per_dataset) for prompts in per_suite]


def main() -> int:
    print(f"load average before: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()})")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["OPS_HOME"] = str(root / "home")
        previous = Path.cwd()
        os.chdir(root)
        try:
            data = _datasets(root / "data")
            adapter = make_adapter(root / "adapters" / "ft")
            rows, results = [], []
            for concurrency in CONCURRENCY:
                r = _posttrain(root, data, adapter, concurrency)
                results.append(r)
                bound_s = r["calls"] / (concurrency / (LATENCY_MS / 1000))
                rows.append([f"ops posttrain, concurrency {concurrency}", f"{int(r['calls']):,}",
                             f"{r['calls'] / r['eval_s']:,.1f}", f"{bound_s:,.1f}", f"{r['eval_s']:,.1f}",
                             f"{bound_s / r['eval_s']:.2f}", f"{r['total_s']:,.1f}"])
            prompts = _oc_prompts(data, OC_PER_MODEL // len(DATASETS))
            adapter_dir = make_adapter(root / "oc-ft")
            sims = [SimServer("sim/base", args=["--latency-ms", str(LATENCY_MS), "--enable-lora", "--lora-modules",
                                                f"ft={adapter_dir}"])]
            try:
                for sim in sims:
                    sim.start()
                rate, errors = _opencompass(sims, prompts, 1, 1, OC_PER_MODEL)
            finally:
                for sim in sims:
                    sim.stop()
        finally:
            os.chdir(previous)
    total = results[0]["calls"]
    oc_s = total / rate
    rows.append(["OpenCompass defaults (qps 1, batch_size 1)", f"{2 * OC_PER_MODEL} measured", f"{rate:,.2f}",
                 "-", f"{oc_s:,.0f} (projected)", "-", f"errors {errors}"])
    table(f"ops posttrain: gsm8k ({GSM8K:,}) + mmlu ({MMLU:,}) + bbh ({BBH:,}, 27 subsets) x base + adapter, "
          f"{REPLICAS} sim replicas at {LATENCY_MS} ms",
          ["harness", "requests", "req/s", "bound s", "eval wall s", "of bound", "end-to-end s"], rows)
    print(f"  OpenCompass slice: {OC_PER_MODEL} prompts a model, gsm8k, mmlu and bbh in turn")
    for concurrency, r in zip(CONCURRENCY, results, strict=True):
        print(f"  concurrency {concurrency}: OpenCompass / ops eval wall = {oc_s / r['eval_s']:,.0f}x "
              f"(end to end {oc_s / r['total_s']:,.0f}x); verdict {r['verdict']}; deltas "
              + ", ".join(f"{name} {'-' if delta is None else format(delta, '+.2f')}"
                       for name, delta in r["deltas"].items()))
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
