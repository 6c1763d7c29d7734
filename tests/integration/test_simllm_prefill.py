"""The sim's prefill is charged on uncached prompt tokens only, its prefix cache has a set capacity, and
decode can slow with the requests in flight (the charges are read from its own counters, not timed)."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any

import httpx

from tests.simserver import SimServer

BLOCK = 128
MESSAGES = [{"role": "user", "content": "prefill probe " + "lorem ipsum dolor sit amet " * 200}]


def chat(sim: SimServer, messages: list[dict[str, Any]] = MESSAGES) -> dict[str, Any]:
    reply = httpx.post(f"{sim.base_url}/v1/chat/completions",
                       json={"model": sim.model, "messages": messages, "max_tokens": 8}, timeout=60)
    assert reply.status_code == 200, reply.text
    return dict(reply.json()["usage"])


def test_prefill_is_charged_on_the_tokens_the_cache_did_not_hold(sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("m", args=["--latency-ms", "0", "--prefill-ms-per-token", "0.01"])
    first, second = chat(sim), chat(sim)
    n = first["prompt_tokens"]
    assert n == second["prompt_tokens"] > 8 * BLOCK
    cached = (n - 1) // BLOCK * BLOCK  # all but the block holding the last token, as vLLM
    metrics = sim.metrics()
    assert metrics["vllm:prefix_cache_hits_total"] == cached
    assert metrics["sim_prefill_tokens_total"] == n + (n - cached)


def test_the_prefix_cache_capacity_is_a_setting(sim_server: Callable[..., SimServer]) -> None:
    small = sim_server("m", args=["--latency-ms", "0", "--prefix-cache-tokens", str(4 * BLOCK)])
    chat(small)  # more than 4 blocks: the oldest (leading) blocks are out again before the next request
    chat(small)
    assert small.metrics()["vllm:prefix_cache_hits_total"] == 0
    roomy = sim_server("m", args=["--latency-ms", "0"])  # the default: 65,536 tokens
    n = chat(roomy)["prompt_tokens"]
    chat(roomy)
    assert roomy.metrics()["vllm:prefix_cache_hits_total"] == (n - 1) // BLOCK * BLOCK


def test_decode_slows_with_the_requests_in_flight(sim_server: Callable[..., SimServer]) -> None:
    """Four requests that overlap (each waits 3 s before it answers): the k-th to arrive decodes at
    1 + 0.5 * (k - 1) times the speed of one alone, so the charge is 1 + 1.5 + 2 + 2.5 = 7 solo charges."""
    sim = sim_server("m", args=["--latency-ms", "3000", "--decode-ms-per-token", "2", "--decode-slowdown", "0.5"])
    messages = [{"role": "user", "content": "hello"}]
    solo = chat(sim, messages)["completion_tokens"]
    assert sim.metrics()["sim_decode_ms_total"] == 2 * solo
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        usages = list(pool.map(lambda _: chat(sim, messages), range(4)))
    assert {u["completion_tokens"] for u in usages} == {solo}  # the same question: the same answer
    assert sim.metrics()["sim_decode_ms_total"] == 2 * solo * (1 + 7)
