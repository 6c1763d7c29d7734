"""The sim's prefill is charged on uncached prompt tokens only, its prefix cache has a set capacity, and
decode can slow with the requests in flight (the charges are read from its own counters, not timed)."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable, Iterator
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


def _running(sim: SimServer, count: int) -> None:
    """Wait until the sim has exactly `count` chat requests in flight."""
    deadline = time.monotonic() + 120
    while sim.metrics()["vllm:num_requests_running"] != count:
        assert time.monotonic() < deadline, f"the sim never had {count} request(s) in flight"
        time.sleep(0.02)


@contextlib.contextmanager
def held_in_flight(sim: SimServer, count: int) -> Iterator[None]:
    """`count` chat requests the sim has begun and cannot finish: each body is cut short and the rest is
    never sent, so they stay in flight for the whole block however slow the machine is (no timing)."""
    held: list[socket.socket] = []
    try:
        for _ in range(count):
            held.append(socket.create_connection(("127.0.0.1", sim.port), timeout=30))
            held[-1].sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                             b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
        _running(sim, count)
        yield
    finally:
        for connection in held:
            connection.close()
    _running(sim, 0)  # the held ones are gone before the next count starts


def test_decode_slows_with_the_requests_in_flight(sim_server: Callable[..., SimServer]) -> None:
    """A request decodes at 1 + 0.5 * (n - 1) times the speed of one alone when it arrives with n requests in
    flight (itself included): one alone, then one beside 1, 2 and 3 others held in flight, is charged
    1 + (1 + 1.5 + 2 + 2.5) = 8 solo charges. The others are held by construction (their body never
    ends), not by a delay that a loaded machine could outlast or interleave."""
    sim = sim_server("m", args=["--latency-ms", "0", "--decode-ms-per-token", "2", "--decode-slowdown", "0.5"])
    messages = [{"role": "user", "content": "hello"}]
    solo = chat(sim, messages)["completion_tokens"]
    assert sim.metrics()["sim_decode_ms_total"] == 2 * solo
    usages = []
    for others in range(4):
        with held_in_flight(sim, others):
            usages.append(chat(sim, messages))
    assert {u["completion_tokens"] for u in usages} == {solo}  # the same question: the same answer
    assert sim.metrics()["sim_decode_ms_total"] == 2 * solo * (1 + 7)
