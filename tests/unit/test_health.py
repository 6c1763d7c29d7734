"""Health probes against real servers: READY, UNHEALTHY, DOWN, DEAD; /metrics parsing; concurrency."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from aiohttp import web

from orchestra_ops.fleet.probes import State, Target, parse_metrics, probe_all, probe_all_sync
from orchestra_ops.fleet.views import undeclared_provider_vars
from tests.helpers import free_port
from tests.simserver import SimServer

METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
vllm:num_requests_waiting{model_name="m"} 7
vllm:kv_cache_usage_perc{model_name="m"} 0.42
vllm:prompt_tokens_total{model_name="m"} 1.2e+06
"""


def test_parse_metrics_sums_label_sets() -> None:
    load = parse_metrics(METRICS)
    assert (load.running, load.waiting, load.kv_cache) == (5.0, 7.0, 0.42)


def test_parse_metrics_reads_the_older_kv_cache_name_and_tolerates_garbage() -> None:
    load = parse_metrics('vllm:gpu_cache_usage_perc{model_name="m"} 0.5\nnot a metric line\nx{a="b"} NaNx\n')
    assert load.kv_cache == 0.5 and load.running is None and load.waiting is None


def _target(port: int, model: str | None = "sim-model", *, alive: bool = True, kind: str = "sim") -> Target:
    return Target(name="m/0", host="127.0.0.1", port=port, kind=kind, served_model_name=model, pid=1,
                  alive=alive)


def test_ready_sim_with_load(sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("sim-model", args=["--latency-ms", "1"])
    [result] = probe_all_sync([_target(sim.port)])
    assert result.state is State.READY, result.detail
    assert result.latency_ms is not None and result.running is not None and result.kv_cache is not None


def test_wrong_model_is_unhealthy(sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("other-model", args=["--latency-ms", "1"])
    [result] = probe_all_sync([_target(sim.port, "sim-model")])
    assert result.state is State.UNHEALTHY and "other-model" in result.detail


def test_failing_chat_is_unhealthy(sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("sim-model", args=["--latency-ms", "1", "--fail", "500:1"])
    [result] = probe_all_sync([_target(sim.port)])
    assert result.state is State.UNHEALTHY and "500" in result.detail


def test_closed_port_is_down_and_gone_process_is_dead() -> None:
    port = free_port()
    down, dead = probe_all_sync([_target(port), _target(port, alive=False)])
    assert down.state is State.DOWN
    assert dead.state is State.DEAD and dead.latency_ms is None


async def _concurrent_probes(count: int) -> tuple[int, list[State]]:
    """`count` retrieval targets on one server whose /health answers only once all are in flight."""
    in_flight = 0
    peak = 0
    everyone = asyncio.Event()

    async def health(request: web.Request) -> web.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        if in_flight == count:
            everyone.set()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(everyone.wait(), timeout=3)  # sequential probes would stall here
        in_flight -= 1
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/health", health)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        targets = [Target(name=f"r{i}", host="127.0.0.1", port=port, kind="retrieval", served_model_name=None)
                   for i in range(count)]
        results = await probe_all(targets, timeout=10)
    finally:
        await runner.cleanup()
    return peak, [r.state for r in results]


def test_all_probes_run_at_once() -> None:
    peak, states = asyncio.run(_concurrent_probes(32))
    assert peak == 32
    assert states == [State.READY] * 32


def test_undeclared_provider_variables_are_named_never_valued() -> None:
    env = {"OPENAI_API_KEY": "sk-secret", "ANTHROPIC_API_KEY": "", "HOME": "/root", "GROQ_API_KEY": "x"}
    assert undeclared_provider_vars(["GROQ_API_KEY"], env) == ["OPENAI_API_KEY"]
