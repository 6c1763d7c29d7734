"""Our client against vLLM's own, on the same real vLLM replica: is `ops bench` ever what limits a real server?

One replica of the tiny model (the CPU build of vLLM, `ops up` of a copy of topologies/vllm_cpu.yaml with one
replica) gets, alternately, ROUNDS runs of
  - `ops bench tiny --concurrency 32 --requests N --max-tokens 16` (orchestra_ops/client/capacity.py: the eval
    client and replica pool, N chat requests with 32 in flight), and
  - `vllm bench serve --backend openai-chat --endpoint /v1/chat/completions --max-concurrency 32` on a custom
    dataset of N copies of the very prompt `ops bench` sends (capacity.BENCH_PROMPT), 16 output tokens.
Both send `ignore_eos` and temperature 0 (ops through the topology's request_defaults), so the server does the
same work per request. Reports requests/s of each run (each tool's own clock, from its first request to its
last answer, its start-up excluded) and ops / vLLM. Goal: ops >= 0.95 of vLLM's client. Never asserts.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.tables import table
from bench.vllm_fleet import MODEL, VLLM, down, missing, up, write_topology
from orchestra_ops.client.capacity import BENCH_PROMPT
from tests.helpers import run_ops

NAME = "bench-vllm-client"
CONCURRENCY = 32
REQUESTS = 512
MAX_TOKENS = 16
ROUNDS = 3
GOAL = 0.95


def _ops_bench(directory: Path) -> float:
    result = run_ops(["bench", "tiny", "--topology", NAME, "--concurrency", str(CONCURRENCY), "--requests",
                      str(REQUESTS), "--max-tokens", str(MAX_TOKENS), "--max-retries", "1", "--json"],
                     env={"OPS_HOME": str(directory / "ops-home")}, cwd=directory, timeout=900)
    if result.returncode != 0:
        raise SystemExit(f"ops bench failed:\n{result.stderr}")
    row = json.loads(result.stdout)["results"][0]
    if row["ok"] != REQUESTS:
        print(f"ops bench: {REQUESTS - row['ok']} request(s) failed: {row['errors']}", file=sys.stderr)
    return float(row["req_per_s"])


def _vllm_bench(directory: Path, port: int, dataset: Path, index: int) -> float:
    out = f"vllm-bench-{index}.json"
    argv = [str(VLLM), "bench", "serve", "--backend", "openai-chat", "--base-url", f"http://127.0.0.1:{port}",
            "--endpoint", "/v1/chat/completions", "--model", "tiny", "--tokenizer", str(MODEL),
            "--dataset-name", "custom", "--dataset-path", str(dataset), "--skip-chat-template",
            "--custom-output-len", str(MAX_TOKENS), "--num-prompts", str(REQUESTS),
            "--max-concurrency", str(CONCURRENCY), "--ignore-eos", "--temperature", "0", "--disable-tqdm",
            "--save-result", "--result-dir", str(directory), "--result-filename", out]
    env = {k: v for k, v in os.environ.items() if k != "VLLM_CPU_KVCACHE_SPACE"}
    result = subprocess.run(argv, cwd=directory, env=env, capture_output=True, text=True, timeout=900,
                            check=False)
    if result.returncode != 0:
        raise SystemExit(f"vllm bench serve failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
    saved = json.loads((directory / out).read_text())
    if saved.get("completed") != REQUESTS:
        print(f"vllm bench serve: {saved.get('completed')} of {REQUESTS} completed", file=sys.stderr)
    return float(saved["request_throughput"])


def main() -> int:
    why = missing()
    if why:
        print(f"skipped: {why}")
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-vllm-client-") as tmp:
        directory = Path(tmp)
        topology = write_topology(directory, NAME, 1,
                                  request_defaults={"ignore_eos": True, "temperature": 0})
        dataset = directory / "prompts.jsonl"
        prompt = BENCH_PROMPT[0]["content"]
        dataset.write_text("".join(json.dumps({"prompt": prompt}) + "\n" for _ in range(REQUESTS)))
        try:
            _, _ = up(directory, topology)
            port = json.loads((directory / "ops-home" / NAME / "model_config.json").read_text())["tiny"][0]["port"]
            load = os.getloadavg()[0]
            ours: list[float] = []
            theirs: list[float] = []
            for index in range(ROUNDS):  # alternately, so drifting load hits both alike
                theirs.append(_vllm_bench(directory, port, dataset, index))
                ours.append(_ops_bench(directory))
                print(f"round {index + 1}: vllm bench serve {theirs[-1]:.1f} req/s, ops bench {ours[-1]:.1f} req/s",
                      flush=True)
        finally:
            down(directory, NAME)
    rows: list[tuple[object, ...]] = [(i + 1, f"{t:.1f}", f"{o:.1f}", f"{o / t:.2f}")
                                      for i, (t, o) in enumerate(zip(theirs, ours, strict=True))]
    median_ratio = statistics.median(ours) / statistics.median(theirs)
    rows.append(("median", f"{statistics.median(theirs):.1f}", f"{statistics.median(ours):.1f}",
                 f"{median_ratio:.2f}"))
    table(f"one real vLLM replica (tiny model, CPU), {REQUESTS} chat requests x {MAX_TOKENS} tokens, "
          f"concurrency {CONCURRENCY}, load avg {load:.1f} at the start",
          ["round", "vllm bench serve req/s", "ops bench req/s", "ops / vllm"], rows)
    print(f"goal: ops >= {GOAL:.2f} of vLLM's client: {'met' if median_ratio >= GOAL else 'NOT met'} "
          f"(median ratio {median_ratio:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
