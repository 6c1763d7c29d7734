"""Health probes: is each replica serving, how loaded is it, how fast does it answer.

A model replica is READY when `/health` answers 200, `/v1/models` lists its served name and a
1-token chat completion succeeds (vLLM binds its port before the engine is up, so "ready" must mean
"serving"); a retrieval service or the gateway is READY when `/health` answers 200. The other states:

    PENDING    not started yet: its slurm job waits for a node (the detail says why)
    STARTING   the port answers but the server says it is not ready yet (503, model not loaded)
    UNHEALTHY  it answers, but wrongly (another model, errors, timeouts)
    DOWN       nothing answers on the port
    DEAD       the recorded process is gone (decided by the caller, from pid + start time) and
               nothing serves on its port
    EXTERNAL   the recorded process is gone, but its port serves the model (a replica started by
               hand, or by something else): it answers, ops does not own it (`ops down` leaves it)

All probes of a fleet run concurrently on one event loop: 32 endpoints take about one probe's time.
Load comes from vLLM's `/metrics`: `vllm:num_requests_running`, `vllm:num_requests_waiting`, and
`vllm:kv_cache_usage_perc` (older vLLM: `vllm:gpu_cache_usage_perc`), summed over label sets; the
prefix-cache hit rate since the replica started from `vllm:prefix_cache_hits_total` /
`vllm:prefix_cache_queries_total` (prompt tokens; client/prefix_counters.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from orchestra_ops.fleet.prefix_counters import PrefixCounters, parse_prefix_counters
from orchestra_ops.fleet.state import server_url

DEFAULT_PROBE_TIMEOUT_S = 5.0


class State(str, enum.Enum):
    READY = "READY"
    PENDING = "PENDING"
    STARTING = "STARTING"
    UNHEALTHY = "UNHEALTHY"
    DOWN = "DOWN"
    DEAD = "DEAD"
    EXTERNAL = "EXTERNAL"


@dataclass(frozen=True)
class Target:
    """What to probe: a process's name, where it serves, what it serves, whether it still runs."""

    name: str
    host: str
    port: int
    kind: str  # vllm | sim | retrieval | ray
    served_model_name: str | None
    pid: int | None = None
    alive: bool = True
    waiting: str | None = None  # why it has not started yet (a slurm job's state); None once it has

    @property
    def base_url(self) -> str:
        return server_url(self.host, self.port)


@dataclass(frozen=True)
class Probe:
    name: str
    host: str
    port: int
    state: State
    latency_ms: float | None
    pid: int | None
    model: str | None
    running: float | None = None
    waiting: float | None = None
    kv_cache: float | None = None  # fraction 0..1, as vLLM reports it
    detail: str = ""
    adapters: tuple[str, ...] = ()  # LoRA adapters /v1/models lists (cards with a parent)
    prefix: PrefixCounters | None = None  # its prefix-cache counters since it started (None: not read)

    @property
    def prefix_hit_rate(self) -> float | None:
        return None if self.prefix is None else self.prefix.hit_rate

    @property
    def ready(self) -> bool:
        return self.state is State.READY

    @property
    def serving(self) -> bool:
        """It answers as it should: READY, or EXTERNAL (serving, but not a process ops started)."""
        return self.state in (State.READY, State.EXTERNAL)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "host": self.host, "port": self.port, "state": self.state.value,
                "latency_ms": None if self.latency_ms is None else round(self.latency_ms, 1),
                "pid": self.pid, "model": self.model, "running": self.running, "waiting": self.waiting,
                "kv_cache": self.kv_cache, "detail": self.detail, "adapters": list(self.adapters),
                "prefix_cache": None if self.prefix is None else {
                    "hits": self.prefix.hits, "queries": self.prefix.queries, "hit_rate": self.prefix.hit_rate}}


# ---- /metrics -------------------------------------------------------------------------------------

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


@dataclass(frozen=True)
class Load:
    running: float | None
    waiting: float | None
    kv_cache: float | None
    prefix: PrefixCounters | None = None


def parse_metrics(text: str) -> Load:
    """Running/waiting requests and KV-cache use from Prometheus text (sums over label sets)."""
    sums: dict[str, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line.strip())
        if not match:
            continue
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        sums[match.group(1)] = sums.get(match.group(1), 0.0) + value
    kv = sums.get("vllm:kv_cache_usage_perc", sums.get("vllm:gpu_cache_usage_perc"))
    return Load(running=sums.get("vllm:num_requests_running"), waiting=sums.get("vllm:num_requests_waiting"),
                kv_cache=kv, prefix=parse_prefix_counters(text))


# ---- probes ---------------------------------------------------------------------------------------


class _Verdict(Exception):
    """Ends a probe early with a state and a reason."""

    def __init__(self, state: State, detail: str) -> None:
        super().__init__(detail)
        self.state = state
        self.detail = detail


async def probe(client: httpx.AsyncClient, target: Target, *, metrics: bool = True) -> Probe:
    """Probe one target; never raises for anything the network or the server does."""
    started = time.perf_counter()
    load = Load(None, None, None)
    adapters: tuple[str, ...] = ()
    if target.waiting is not None:
        state, detail = State.PENDING, target.waiting
    else:
        try:
            if target.kind in ("retrieval", "gateway"):
                await _check_health(client, target)
            elif target.kind == "ray":  # a Ray node serves no HTTP: its port (GCS, node manager) accepts
                await _check_port(target)
            else:
                served = target.served_model_name or ""
                await _check_health(client, target)
                adapters = await _check_models(client, target, served)
                if metrics:
                    load, _ = await asyncio.gather(_load(client, target), _check_chat(client, target, served))
                else:
                    await _check_chat(client, target, served)
            state, detail = State.READY, ""
        except _Verdict as verdict:
            state, detail = verdict.state, verdict.detail
        if not target.alive:  # our process is gone: whatever answers there is someone else's
            state, detail = ((State.EXTERNAL, f"the recorded process (pid {target.pid}) is gone, but the port "
                              "serves it: a process ops did not start (`ops down` leaves it; stop it, then "
                              f"`ops restart {target.name}`)")
                             if state is State.READY else (State.DEAD, "the recorded process is gone"))
    latency = (time.perf_counter() - started) * 1000 if state not in (State.DEAD, State.PENDING) else None
    return Probe(name=target.name, host=target.host, port=target.port, state=state, latency_ms=latency,
                 pid=target.pid, model=target.served_model_name, running=load.running,
                 waiting=load.waiting, kv_cache=load.kv_cache, detail=detail, adapters=adapters,
                 prefix=load.prefix)


async def probe_all(targets: Sequence[Target], *, timeout: float = DEFAULT_PROBE_TIMEOUT_S,
                    metrics: bool = True) -> list[Probe]:
    """Probe every target concurrently; results in the order of `targets`."""
    limits = httpx.Limits(max_connections=max(16, 2 * len(targets)), max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=timeout, limits=limits, trust_env=False) as client:
        return list(await asyncio.gather(*(probe(client, t, metrics=metrics) for t in targets)))


def probe_all_sync(targets: Sequence[Target], *, timeout: float = DEFAULT_PROBE_TIMEOUT_S,
                   metrics: bool = True) -> list[Probe]:
    return asyncio.run(probe_all(targets, timeout=timeout, metrics=metrics))


async def _request(client: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> httpx.Response:
    try:
        return await client.request(method, url, **kwargs)
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise _Verdict(State.DOWN, f"no answer on the port ({type(exc).__name__})") from None
    except httpx.TimeoutException as exc:
        raise _Verdict(State.UNHEALTHY, f"{url.rsplit('/', 1)[-1]}: timed out ({type(exc).__name__})") from None
    except httpx.HTTPError as exc:
        raise _Verdict(State.UNHEALTHY, f"{url}: {type(exc).__name__}: {exc}") from None


def _not_ok(response: httpx.Response, what: str) -> _Verdict:
    state = State.STARTING if response.status_code == 503 else State.UNHEALTHY
    return _Verdict(state, f"{what} answered {response.status_code}")


async def _check_health(client: httpx.AsyncClient, target: Target) -> None:
    response = await _request(client, "GET", f"{target.base_url}/health")
    if response.status_code != 200:
        raise _not_ok(response, "/health")


async def _check_port(target: Target, timeout: float = DEFAULT_PROBE_TIMEOUT_S) -> None:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(target.host, target.port), timeout)
    except (OSError, asyncio.TimeoutError) as exc:
        raise _Verdict(State.DOWN, f"no answer on the port ({type(exc).__name__})") from None
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()


async def _check_models(client: httpx.AsyncClient, target: Target, served: str) -> tuple[str, ...]:
    response = await _request(client, "GET", f"{target.base_url}/v1/models")
    if response.status_code != 200:
        raise _not_ok(response, "/v1/models")
    try:
        cards = response.json().get("data", [])
        ids = [str(item.get("id")) for item in cards]
        adapters = tuple(str(item.get("id")) for item in cards if item.get("parent"))
    except (ValueError, AttributeError):
        raise _Verdict(State.UNHEALTHY, "/v1/models did not answer a model list") from None
    if served not in ids:
        raise _Verdict(State.UNHEALTHY, f"/v1/models lists {ids or 'nothing'}, not {served!r}")
    return adapters


async def _check_chat(client: httpx.AsyncClient, target: Target, served: str) -> None:
    body = {"model": served, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}
    response = await _request(client, "POST", f"{target.base_url}/v1/chat/completions", json=body)
    if response.status_code != 200:
        raise _not_ok(response, "a 1-token chat request")


async def _load(client: httpx.AsyncClient, target: Target) -> Load:
    try:
        response = await client.get(f"{target.base_url}/metrics")
    except httpx.HTTPError:
        return Load(None, None, None)
    return parse_metrics(response.text) if response.status_code == 200 else Load(None, None, None)
