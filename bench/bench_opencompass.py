"""gsm8k for a base model and its adapter: `ops eval gsm8k` against the bound and OpenCompass's request pattern.

1,319 gsm8k-shaped samples (the 4-shot chat prompt of `ops eval gsm8k`) x 2 models (the base
model and a LoRA adapter on the same replicas) = 2,638 requests, over 2 simulated replicas that
answer in a fixed 200 ms and serve both.

1. `ops eval gsm8k --model base --model ft` (in process: orchestra_ops.api.evaluate, the CLI's session) at
   concurrency 32 (its default) and 256. The bound is concurrency / 0.2 s; the scoring step
   (scores.json, predictions/, results/, summary/) is timed on its own.
2. OpenCompass's request pattern, one model after the other (one infer task per model): its
   OpenAISDK wrapper takes a token from a TokenBucket (a daemon thread adds one token every 1/qps s,
   holding at most qps) before each request, and each inference batch goes through a fresh
   ThreadPoolExecutor; the next batch waits for the slowest request of this one. Same prompts, the
   OpenAI SDK, the same replicas. At its defaults (query_per_second 1, batch_size 1, GenInferencer's)
   and at qps 16 / batch_size 16 (RD-Agent's batch size); each is measured on a slice of the
   requests and the time for all 2,638 is projected from the measured rate (it is rate-limited, so
   the rate is steady).
The load average is printed before and after: client and servers share this machine's cores.
Never asserts; returns 0.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from orchestra_ops.services.simllm.opencompass_rules import gsm8k_truth

from bench.tables import table
from orchestra_ops.api import EvalOptions, evaluate
from tests.adapters import make_adapter
from tests.simserver import SimServer

SAMPLES = 1_319
MODELS = ("sim/base", "ft")
LATENCY_MS = 200
REPLICAS = 2
OPS_CONCURRENCY = (32, 256)
# (label, qps, batch_size, requests measured per model)
OPENCOMPASS = (("OpenCompass defaults: qps 1, batch_size 1", 1, 1, 15),
               ("OpenCompass qps 16, batch_size 16", 16, 16, 160))


def _dataset(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "test.jsonl", "w") as handle:
        for i in range(SAMPLES):
            question = (f"Bench problem {i}: a warehouse receives crates every morning and ships some every "
                        "evening. How many crates are in the warehouse at the end of the month?")
            handle.write(json.dumps({"question": question, "answer": f"Steps.\n#### {gsm8k_truth(question):,}"}) + "\n")
    return folder


def _ops(config: Path, dataset: Path, run_dir: Path, concurrency: int) -> tuple[float, float, float]:
    """(units per second while running, accuracy of ft - base in points, seconds to score and write outputs)."""
    options = EvalOptions(dataset=str(dataset), run_dir=str(run_dir), concurrency=concurrency,
                          model_config=str(config), model=MODELS[0], models=MODELS, progress_interval_s=60.0)
    result = evaluate(options, "gsm8k", analyze=False)
    assert result.scores is not None and result.scoring_s is not None and result.ok == SAMPLES * len(MODELS), result
    diff = result.scores["comparisons"][MODELS[1]]["gsm8k"]["difference"]
    return result.ran / result.elapsed_s, diff, result.scoring_s  # scoring_s: the scoring step alone


class TokenBucket:
    """OpenCompass's rate limit as the reference describes it: a daemon thread adds a token every
    1/rate s while fewer than `rate` are waiting; each request takes one first."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.tokens = threading.Semaphore(0)
        self.count = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._fill, daemon=True).start()

    def _fill(self) -> None:
        while True:
            with self.lock:
                if self.count < self.rate:
                    self.count += 1
                    self.tokens.release()
            time.sleep(1 / self.rate)

    def get_token(self) -> None:
        self.tokens.acquire()
        with self.lock:
            self.count -= 1


def _opencompass(sims: list[SimServer], prompts: list[list[dict[str, str]]], qps: int, batch_size: int,
                 per_model: int) -> tuple[float, int]:
    """(requests per second, errors) for `per_model` requests of each model, one model after the other."""
    import openai

    done = errors = 0
    start = time.perf_counter()
    for model in MODELS:
        client = openai.OpenAI(base_url=f"{sims[0].base_url}/v1", api_key="EMPTY", max_retries=0)
        bucket = TokenBucket(qps)

        def one(messages: list[dict[str, str]], client: Any = client, model: str = model,
                bucket: TokenBucket = bucket) -> bool:
            bucket.get_token()
            try:
                client.chat.completions.create(model=model, messages=messages, max_tokens=512, temperature=0)
            except openai.OpenAIError:
                return False
            return True

        work = prompts[:per_model]
        for first in range(0, len(work), batch_size):
            with ThreadPoolExecutor(max_workers=min(32, (os.cpu_count() or 1) + 4)) as pool:
                results = list(pool.map(one, work[first:first + batch_size]))
            done += len(results)
            errors += results.count(False)
    return done / (time.perf_counter() - start), errors


def main() -> int:
    print(f"load average before: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()})")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        adapter = make_adapter(root / "ft")
        sims = [SimServer(MODELS[0], args=["--latency-ms", str(LATENCY_MS), "--enable-lora", "--lora-modules",
                                           f"ft={adapter}"]) for _ in range(REPLICAS)]
        try:
            for sim in sims:
                sim.start()
            config = root / "model_config.json"
            endpoints = [{"ip_addr": "127.0.0.1", "port": s.port} for s in sims]
            config.write_text(json.dumps({name: endpoints for name in MODELS}))
            dataset = _dataset(root / "gsm8k")
            ops_rows = []
            for concurrency in OPS_CONCURRENCY:
                rate, diff, scoring = _ops(config, dataset, root / f"run-{concurrency}", concurrency)
                bound = concurrency / (LATENCY_MS / 1000)
                total = SAMPLES * len(MODELS)
                ops_rows.append([f"ops eval gsm8k, concurrency {concurrency}", f"{total:,}", f"{rate:,.1f}",
                                 f"{bound:,.0f}", f"{rate / bound:.2f}", f"{total / rate:,.1f}", f"{scoring:.2f}"])
            from orchestra_ops.evals.opencompass.gsm8k import Gsm8kSuite

            from orchestra_ops.runner.templates import load_templates

            suite = Gsm8kSuite()
            suite.templates = dict(load_templates(suite.template_files, {}))
            suite.check({})
            samples = suite.load(dataset, dedupe=False)
            prompts = [suite.messages({**s, "model": MODELS[0]}) for s in samples]
            oc_rows = []
            for label, qps, batch, per_model in OPENCOMPASS:
                rate, errors = _opencompass(sims, prompts, qps, batch, per_model)
                projected = SAMPLES * len(MODELS) / rate
                oc_rows.append([label, f"{per_model * len(MODELS)} (measured)", f"{rate:,.2f}", "-", "-",
                                f"{projected:,.0f} (projected)", f"errors {errors}"])
        finally:
            for sim in sims:
                sim.stop()
    print(f"ft - base on gsm8k (ops): {diff:+.2f} points")
    table(f"gsm8k, {SAMPLES:,} samples x {len(MODELS)} models (base + LoRA adapter), {REPLICAS} sim replicas at "
          f"{LATENCY_MS} ms",
          ["harness", "requests", "req/s", "bound req/s", "of bound", "s for 2,638", "scoring s"],
          [*ops_rows, *oc_rows])
    best = float(ops_rows[-1][2].replace(",", ""))
    for row in oc_rows:
        print(f"  ops (concurrency {OPS_CONCURRENCY[-1]}) / {row[0]}: {best / float(row[2].replace(',', '')):,.0f}x")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
