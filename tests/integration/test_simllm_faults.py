"""Fault injection, determinism, crash-after, startup delay and the in-flight gauge, over real HTTP."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections import Counter

import aiohttp
import httpx
import psutil
from orchestra_ops.services.simllm.config import SimConfig
from orchestra_ops.services.simllm.faults import FaultPlan

from tests.helpers import frozen_once
from tests.simserver import SimServer

MODEL = "fault-model"
RUBRIC_PROMPT = ("<<conversation>>\nuser: q\nassistant: \\boxed{sim-0000abcd}\n"
                 "<<rubric_item>>\n[3] is right\nReply with JSON: explanation, criteria_met.")


def body(prompt: str = RUBRIC_PROMPT) -> bytes:
    return json.dumps({"model": MODEL, "messages": [{"role": "user", "content": prompt}]}).encode()


async def fire(base_url: str, count: int, concurrency: int, timeout: float = 30.0) -> list[tuple[int, str]]:
    """POST `count` chat requests, at most `concurrency` at once; (status or -1 on timeout, body)."""
    sem = asyncio.Semaphore(concurrency)
    payload = body()
    headers = {"Content-Type": "application/json"}
    client_timeout = aiohttp.ClientTimeout(total=timeout)
    async with aiohttp.ClientSession(timeout=client_timeout,
                                     connector=aiohttp.TCPConnector(limit=concurrency)) as session:

        async def one() -> tuple[int, str]:
            async with sem:
                try:
                    async with session.post(f"{base_url}/v1/chat/completions", data=payload,
                                            headers=headers) as resp:
                        text = await resp.text()
                        if resp.status == 429:
                            assert resp.headers["Retry-After"] == "1"
                        return resp.status, text
                except asyncio.TimeoutError:
                    return -1, ""

        return await asyncio.gather(*(one() for _ in range(count)))


def is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def test_fault_rates_over_2000_requests_match_the_seeded_plan() -> None:
    args = ["--latency-ms", "0", "--fail", "500:0.05,429:0.02", "--malformed-rate", "0.1", "--seed", "11"]
    with SimServer(model=MODEL, args=args) as sim:
        results = asyncio.run(fire(sim.base_url, 2000, 32))
        metrics = sim.metrics()
    statuses = Counter(status for status, _ in results)
    malformed = sum(1 for status, text in results
                    if status == 200 and not is_json(json.loads(text)["choices"][0]["message"]["content"]))
    plan = FaultPlan(SimConfig(model=MODEL, fail=((500, 0.05), (429, 0.02)), malformed_rate=0.1, seed=11))
    fates = [plan.next() for _ in range(2000)]
    expected = Counter(f.status or 200 for f in fates)
    assert statuses == expected  # the same multiset whatever the arrival order
    assert malformed == sum(1 for f in fates if f.status is None and f.malformed)
    assert abs(statuses[500] / 2000 - 0.05) < 0.02
    assert abs(statuses[429] / 2000 - 0.02) < 0.01
    assert abs(malformed / statuses[200] - 0.1) < 0.03
    assert metrics['sim_requests_failed_total{status="500"}'] == statuses[500]
    assert metrics["sim_malformed_total"] == malformed


def _sequence(seed: int, count: int) -> list[int]:
    args = ["--latency-ms", "0", "--fail", "500:0.3", "--seed", str(seed)]
    with SimServer(model=MODEL, args=args) as sim, httpx.Client(base_url=sim.base_url) as client:
        return [client.post("/v1/chat/completions", content=body("hi")).status_code for _ in range(count)]


def test_same_seed_gives_the_same_sequence() -> None:
    first, second, other = _sequence(5, 150), _sequence(5, 150), _sequence(6, 150)
    assert first == second
    assert first != other
    plan = FaultPlan(SimConfig(model=MODEL, fail=((500, 0.3),), seed=5))
    assert first == [plan.next().status or 200 for _ in range(150)]


def test_hang_rate_never_answers_and_frees_the_slot_when_the_client_goes() -> None:
    with SimServer(model=MODEL, args=["--latency-ms", "0", "--hang-rate", "0.3", "--seed", "3"]) as sim:
        results = asyncio.run(fire(sim.base_url, 40, 40, timeout=1.0))
        plan = FaultPlan(SimConfig(model=MODEL, hang_rate=0.3, seed=3))
        hung = sum(plan.next().hang for _ in range(40))
        assert 0 < hung < 40
        assert sum(1 for status, _ in results if status == -1) == hung
        assert sim.metrics()["sim_requests_hung_total"] == hung
        deadline = time.monotonic() + 10
        while sim.metrics()["sim_requests_in_flight"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sim.metrics()["vllm:num_requests_running"] == 0


def test_max_in_flight_gauge_under_known_concurrency() -> None:
    with SimServer(model=MODEL, args=["--latency-ms", "300"]) as sim:
        results = asyncio.run(fire(sim.base_url, 30, 5))
        assert all(status == 200 for status, _ in results)
        assert sim.metrics()["sim_max_requests_in_flight"] == 5
        asyncio.run(fire(sim.base_url, 12, 12))
        metrics = sim.metrics()
        assert metrics["sim_max_requests_in_flight"] == 12
        assert metrics["sim_requests_total"] == 42


def test_crash_after_exits() -> None:
    with SimServer(model=MODEL, args=["--latency-ms", "0", "--crash-after", "3"]) as sim:
        with httpx.Client(base_url=sim.base_url) as client:
            for _ in range(3):
                assert client.post("/v1/chat/completions", content=body("hi")).status_code == 200
        assert sim.process is not None
        assert sim.process.wait(timeout=15) == 1
        assert "crash-after 3 reached" in sim.log_tail()


def _refused(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def test_startup_delay_delays_the_bind() -> None:
    sim = SimServer(model=MODEL, args=["--startup-delay-s", "2"])
    try:
        process = sim.spawn()
        def started() -> bool:
            assert process.poll() is None, sim.log_tail()
            return "simllm starting" in sim.log_tail()

        # frozen from the first look that finds it started: inside its delay however slowly the test runs
        with frozen_once(process.pid, started, "simllm starting", 60):
            assert "simllm serving" not in sim.log_tail()
            assert _refused(sim.port)  # started, but not serving until the delay is over
        sim.wait_ready(30)
        assert not _refused(sim.port)
        log = sim.log_tail()
        assert log.index("simllm starting") < log.index("simllm serving")
        assert time.time() - psutil.Process(process.pid).create_time() >= 2.0  # counted from process start
    finally:
        sim.stop()


def test_sim_server_fixture(sim_server) -> None:
    sim = sim_server(model="fixture-model", args=["--latency-ms", "1"])
    assert httpx.get(f"{sim.base_url}/health").status_code == 200
    assert sim.metrics()["sim_requests_total"] == 0
