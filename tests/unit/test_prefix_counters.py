"""The replicas' prefix-cache counters: parsing, windows across a restart, `ops health`'s hit rate."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from orchestra_ops.fleet.prefix_counters import PrefixCounters, parse_prefix_counters, window
from orchestra_ops.fleet.probes import State, Target, parse_metrics, probe_all_sync
from tests.simserver import SimServer

BLOCK = 128
VLLM_TEXT = """\
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000.0
vllm:prefix_cache_queries_created{engine="0",model_name="m"} 1.7e+09
vllm:prefix_cache_queries_total{engine="1",model_name="m"} 500.0
vllm:prefix_cache_queries_created{engine="1",model_name="m"} 1.7000001e+09
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 640.0
vllm:prefix_cache_hits_total{engine="1",model_name="m"} 128.0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 7.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 2.0
vllm:prompt_tokens_total{engine="0",model_name="m"} 1500.0
"""


def test_counters_are_summed_over_engines_and_created_is_the_latest() -> None:
    counters = parse_prefix_counters(VLLM_TEXT)
    assert counters == PrefixCounters(hits=768.0, queries=1500.0, requests=9.0, created=1.7000001e9)
    assert counters.hit_rate == 768 / 1500
    assert parse_metrics(VLLM_TEXT).prefix == counters
    assert parse_prefix_counters("vllm:num_requests_running 1\n") is None  # no prefix counters: not vLLM
    assert PrefixCounters(0, 0).hit_rate is None
    assert PrefixCounters.from_json(counters.to_json()) == counters and PrefixCounters.from_json({"hits": 1}) is None


def test_a_window_is_the_difference_unless_the_replica_restarted() -> None:
    start = PrefixCounters(hits=100, queries=400, requests=10, created=1000.0)
    later = PrefixCounters(hits=900, queries=1400, requests=30, created=1000.0)
    span = window(start, later)
    assert (span.hits, span.queries, span.requests, span.restarted) == (800, 1000, 20, False)
    assert span.hit_rate == 0.8
    restarted = PrefixCounters(hits=256, queries=1024, requests=3, created=2000.0)  # a new engine, counting again
    span = window(start, restarted)
    assert (span.hits, span.queries, span.requests, span.restarted) == (256, 1024, 3, True)
    went_down = PrefixCounters(hits=50, queries=2000, requests=40)  # no _created: a counter going down says it
    assert window(PrefixCounters(hits=100, queries=400, requests=10), went_down).restarted


def test_health_shows_each_replicas_hit_rate_since_it_started(sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("sim-model", args=["--latency-ms", "1"])
    messages = [{"role": "user", "content": "prefix " + "lorem ipsum dolor " * 160}]
    usage = []
    for _ in range(2):
        reply = httpx.post(f"{sim.base_url}/v1/chat/completions",
                           json={"model": "sim-model", "messages": messages, "max_tokens": 1}, timeout=30)
        usage.append(reply.json()["usage"]["prompt_tokens"])
    n = usage[0]
    assert n == usage[1] > 3 * BLOCK
    [probe] = probe_all_sync([Target(name="m/0", host="127.0.0.1", port=sim.port, kind="sim",
                                     served_model_name="sim-model")])
    assert probe.state is State.READY and probe.prefix is not None
    assert probe.prefix.hits == (n - 1) // BLOCK * BLOCK  # the second request found all but the last block
    ping = probe.prefix.queries - 2 * n  # the probe's own 1-token chat may be counted already (< 1 block: no hit)
    assert 0 <= ping < BLOCK
    assert probe.prefix_hit_rate == probe.prefix.hits / probe.prefix.queries
    assert probe.to_json()["prefix_cache"] == {"hits": probe.prefix.hits, "queries": probe.prefix.queries,
                                               "hit_rate": probe.prefix_hit_rate}
