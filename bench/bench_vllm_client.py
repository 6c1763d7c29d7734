"""Our client against vLLM's own, on the same real vLLM replica: is `ops bench` ever what limits a real server?

One replica of the tiny model (the CPU build of vLLM, `ops up` of a copy of topologies/vllm_cpu.yaml with one
replica) gets, alternately, ROUNDS runs of
  - `ops bench tiny --concurrency 32 --requests N --max-tokens 16` (orchestra_ops/client/capacity.py: the eval
    client and replica pool, N chat requests with 32 in flight), and
  - `vllm bench serve --backend openai-chat --endpoint /v1/chat/completions --max-concurrency 32
    --dataset-name random` with prompts as long as the one `ops bench` sends (capacity.BENCH_PROMPT, counted
    by the model's tokenizer) and 16 output tokens. (Its `custom` dataset, which could send the very same
    prompt, needs pandas, which the engine's venv does not have.)
  - the reference's minimal client (vllm-cpu.md §10: aiohttp, one session, the same non-streaming request
    body ops sends), because vLLM's client always STREAMS (it measures time to first token): the server then
    sends one SSE chunk per token (with usage in each: --enable-force-include-usage), which costs it more per
    request than the one JSON answer ops asks for. The like-for-like baseline of "our client never limits the
    server" is therefore the minimal non-streaming client; vLLM's own is reported beside it.
All send `ignore_eos` and temperature 0 (ops through the topology's request_defaults), and the server's own
counters (vllm:generation_tokens_total, vllm:request_success_total) check that each run generated 16 tokens
per request. Reports requests/s of each run (each tool's own clock, first request to last answer, start-up
excluded) and the ratios. Goal: ops >= 0.95 of the other clients. Never asserts.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import aiohttp
import httpx

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


def _counters(port: int) -> tuple[float, float]:
    """(generation tokens, finished requests) so far, from the replica's /metrics."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
    tokens = sum(float(line.split()[-1]) for line in text.splitlines()
                 if line.startswith("vllm:generation_tokens_total{"))
    done = sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith("vllm:request_success_total{"))
    return tokens, done


def _measured(port: int, run: Callable[[], float]) -> tuple[float, float]:
    """(req/s, generated tokens per finished request on the server) of one run."""
    tokens, done = _counters(port)
    rate = run()
    tokens_after, done_after = _counters(port)
    return rate, (tokens_after - tokens) / max(1.0, done_after - done)


async def _minimal(port: int) -> float:
    """vllm-cpu.md §10's client: aiohttp, CONCURRENCY workers, the body ops sends, no streaming."""
    body = {"model": "tiny", "messages": BENCH_PROMPT, "max_tokens": MAX_TOKENS, "ignore_eos": True,
            "temperature": 0}
    remaining = iter(range(REQUESTS))
    failed = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONCURRENCY)) as session:
        async def worker() -> None:
            nonlocal failed
            for _ in remaining:
                async with session.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body) as response:
                    await response.read()
                    failed += response.status != 200
        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        elapsed = time.perf_counter() - started
    if failed:
        print(f"minimal client: {failed} request(s) failed", file=sys.stderr)
    return REQUESTS / elapsed


def _prompt_tokens() -> int:
    """BENCH_PROMPT's text in tokens of the tiny model's tokenizer (what the random dataset's length means)."""
    code = ("import sys; from transformers import AutoTokenizer; "
            "print(len(AutoTokenizer.from_pretrained(sys.argv[1])(sys.argv[2])['input_ids']))")
    done = subprocess.run([str(VLLM.parent / "python"), "-c", code, str(MODEL), BENCH_PROMPT[0]["content"]],
                          capture_output=True, text=True, check=True, timeout=300)
    return int(done.stdout.split()[-1])


def _vllm_bench(directory: Path, port: int, input_len: int, index: int) -> float:
    out = f"vllm-bench-{index}.json"
    argv = [str(VLLM), "bench", "serve", "--backend", "openai-chat", "--base-url", f"http://127.0.0.1:{port}",
            "--endpoint", "/v1/chat/completions", "--model", "tiny", "--tokenizer", str(MODEL),
            "--dataset-name", "random", "--random-input-len", str(input_len), "--random-output-len",
            str(MAX_TOKENS), "--random-range-ratio", "0", "--num-prompts", str(REQUESTS),
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
        input_len = _prompt_tokens()
        try:
            _, _ = up(directory, topology)
            port = json.loads((directory / "ops-home" / NAME / "model_config.json").read_text())["tiny"][0]["port"]
            load = os.getloadavg()[0]
            results: dict[str, list[tuple[float, float]]] = {"vllm": [], "minimal": [], "ops": []}
            for index in range(ROUNDS):  # alternately, so drifting load hits all alike
                results["vllm"].append(_measured(port, partial(_vllm_bench, directory, port, input_len, index)))
                results["minimal"].append(_measured(port, lambda: asyncio.run(_minimal(port))))
                results["ops"].append(_measured(port, lambda: _ops_bench(directory)))
                print(f"round {index + 1}: " + ", ".join(f"{k} {v[-1][0]:.1f} req/s ({v[-1][1]:.1f} tok/req)"
                                                               for k, v in results.items()), flush=True)
        finally:
            down(directory, NAME)
    rows: list[tuple[object, ...]] = []
    for i in range(ROUNDS):
        (v, vt), (m, mt), (o, ot) = results["vllm"][i], results["minimal"][i], results["ops"][i]
        rows.append((i + 1, f"{v:.1f}", f"{m:.1f}", f"{o:.1f}", f"{o / m:.2f}", f"{o / v:.2f}",
                     f"{vt:.1f} / {mt:.1f} / {ot:.1f}"))
    med = {k: statistics.median(r for r, _ in v) for k, v in results.items()}
    rows.append(("median", f"{med['vllm']:.1f}", f"{med['minimal']:.1f}", f"{med['ops']:.1f}",
                 f"{med['ops'] / med['minimal']:.2f}", f"{med['ops'] / med['vllm']:.2f}", ""))
    table(f"one real vLLM replica (tiny model, CPU), {REQUESTS} chat requests x {MAX_TOKENS} tokens, "
          f"concurrency {CONCURRENCY}, load avg {load:.1f} at the start",
          ["round", "vllm bench serve (streams)", "minimal aiohttp", "ops bench", "ops / minimal", "ops / vllm",
           "server tok/req v/m/o"], rows)
    worst = min(med["ops"] / med["minimal"], med["ops"] / med["vllm"])
    print(f"goal: ops >= {GOAL:.2f} of the other clients: {'met' if worst >= GOAL else 'NOT met'} "
          f"(median ratios: ops/minimal {med['ops'] / med['minimal']:.2f}, ops/vllm {med['ops'] / med['vllm']:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
