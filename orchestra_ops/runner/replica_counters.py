"""Each replica's own counters at the start and end of a run, and the sessions that moved, in profile.jsonl.

Whether session affinity works is read from vLLM's counters, never assumed: before the first
request and after the last, the run reads `/metrics` of every replica of every model it calls
(client/prefix_counters.py) and writes one event per replica:

    {"type": "replica_counters", "phase": "start"|"end", "model", "replica", "time",
     "hits", "queries", "requests", "created"}          (or "error" when /metrics did not answer)

and one event per session that moved to another replica (client/affinity.py):

    {"type": "session_move", "model", "session", "from", "to", "reason", "time"}

`ops analyze` pairs the readings of each run (a resumed run adds a pair), names a replica that
restarted in between or finished more requests than the run sent it (other clients), and reports
each model's hit rate, calls per replica and moves (analysis/placement.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from orchestra_ops.client.affinity import Move
from orchestra_ops.client.call_errors import TransportError
from orchestra_ops.client.fleet_client import FleetClient
from orchestra_ops.client.replica import Replica
from orchestra_ops.errors import ConfigError
from orchestra_ops.fleet.prefix_counters import PrefixCounters, parse_prefix_counters

METRICS_TIMEOUT_S = 5.0
Phase = Literal["start", "end"]


@dataclass(frozen=True)
class CounterReading:
    phase: Phase
    model: str
    replica: str
    time: float  # epoch s
    counters: PrefixCounters | None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "replica_counters", "phase": self.phase, "model": self.model,
                               "replica": self.replica, "time": round(self.time, 6)}
        if self.counters is not None:
            out.update(self.counters.to_json())
        else:
            out["error"] = self.error or "no prefix-cache counters"
        return out


@dataclass(frozen=True)
class MoveEvent:
    model: str
    move: Move
    time: float

    def to_json(self) -> dict[str, Any]:
        return {"type": "session_move", "model": self.model, "session": self.move.session, "from": self.move.source,
                "to": self.move.dest, "reason": self.move.reason, "time": round(self.time, 6)}


def metrics_url(replica: Replica) -> str | None:
    """A server replica's /metrics (None for a provider endpoint, which has no health URL either)."""
    if replica.health_url is None:
        return None
    return replica.health_url.removesuffix("/health") + "/metrics"


async def read_counters(fleet: FleetClient, names: Iterable[str], phase: Phase) -> list[CounterReading]:
    """One reading per replica of every model (not provider) that `names` resolve to, read concurrently."""
    replicas: dict[str, tuple[str, Replica]] = {}
    for name in names:
        try:
            target = fleet.routing.chat_target(name)
        except ConfigError:  # not a chat model (the run checked its names before it started)
            continue
        if target.kind != "model":
            continue
        for replica in fleet.client(name).pool.replicas:
            replicas.setdefault(replica.address, (target.name, replica))
    readings = await asyncio.gather(*(_read(fleet, model, replica, phase) for model, replica in replicas.values()))
    return [r for r in readings if r is not None]


async def _read(fleet: FleetClient, model: str, replica: Replica, phase: Phase) -> CounterReading | None:
    url = metrics_url(replica)
    if url is None:
        return None
    try:
        resp = await fleet.transport.get(replica, url, timeout=METRICS_TIMEOUT_S)
    except TransportError as exc:
        return CounterReading(phase, model, replica.address, time.time(), None, exc.message)
    if resp.status != 200:
        return CounterReading(phase, model, replica.address, time.time(), None, f"/metrics answered {resp.status}")
    counters = parse_prefix_counters(resp.body.decode("utf-8", errors="replace"))
    return CounterReading(phase, model, replica.address, time.time(), counters,
                          None if counters is not None else "/metrics has no vllm:prefix_cache counters")
