"""Preflight: before the first task, every model the run calls has a live replica that answers.

One cheap GET (`/v1/models`) per replica, all at once, each with a short timeout. A role with no
answering replica stops the run at once (FleetUnavailable, exit 3) naming what is down and how to bring
it up, instead of every task waiting for a replica that will never come. Providers (external APIs)
are not probed: they have no health endpoint we may call, and a probe would spend the user's quota.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from orchestra_ops.client.call_errors import TransportError
from orchestra_ops.client.replica import Replica
from orchestra_ops.client.routing import Routing, Target
from orchestra_ops.client.transport import AiohttpTransport, Transport
from orchestra_ops.errors import FleetUnavailable

PROBE_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class Probe:
    address: str
    ok: bool
    detail: str  # "answered 200", "connection refused", "timeout", "answered 503"


async def probe_replica(transport: Transport, host: str, port: int, timeout_s: float) -> Probe:
    replica = Replica.for_server(host, port, cap=1)
    try:
        resp = await transport.get(replica, replica.models_url, timeout=timeout_s)
    except TransportError as exc:
        if exc.kind == "timeout":
            detail = f"no answer within {timeout_s:g} s"
        elif "Connect call failed" in exc.message or "Connection refused" in exc.message:
            detail = "connection refused (nothing listens there)"
        else:
            detail = exc.message.removeprefix(f"{replica.address}: ")
        return Probe(replica.address, False, detail)
    return Probe(replica.address, resp.status == 200, f"answered {resp.status}")


async def probe_targets(targets: Sequence[Target], timeout_s: float = PROBE_TIMEOUT_S,
                        transport: Transport | None = None) -> dict[str, list[Probe]]:
    """target name -> a probe of each of its replicas (providers are skipped)."""
    own = transport is None
    client = transport or AiohttpTransport()
    local = [t for t in targets if t.kind != "provider"]
    try:
        jobs = [[probe_replica(client, host, port, timeout_s) for host, port in t.addresses] for t in local]
        flat = await asyncio.gather(*(job for row in jobs for job in row))
    finally:
        if own:
            await client.close()
    out: dict[str, list[Probe]] = {}
    index = 0
    for target, row in zip(local, jobs, strict=True):
        out[target.name] = list(flat[index:index + len(row)])
        index += len(row)
    return out


def check_live(routing: Routing, names: Sequence[str], timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """FleetUnavailable (exit 3) when a name the run calls resolves to a model none of whose replicas answers."""
    wanted: dict[str, list[str]] = {}  # target name -> the roles (names) that go there
    targets: dict[str, Target] = {}
    for name in names:
        target = routing.chat_target(name)
        targets[target.name] = target
        wanted.setdefault(target.name, []).append(name)
    probes = asyncio.run(probe_targets(list(targets.values()), timeout_s))
    down = [name for name, row in probes.items() if not any(p.ok for p in row)]
    if not down:
        return
    have = "has" if len(down) == 1 else "have"
    lines = [f"preflight: {len(down)} model(s) this run calls {have} no live replica (nothing was run):"]
    for name in down:
        target = targets[name]
        roles = ", ".join(wanted[name])
        detail = "; ".join(f"{p.address} {p.detail}" for p in probes[name]) or "no replicas"
        lines.append(f"role {roles} -> model {name} (served as '{target.served_name}'): {detail}")
    lines.append(f"bring it up with `ops up {_topology_hint(routing)}` (or start the servers {routing.endpoints_file} "
                 "lists), then run this again (with --resume to continue a run dir)")
    raise FleetUnavailable("\n".join(lines), down)


def _topology_hint(routing: Routing) -> str:
    """The topology file when routing came from one, else TOPOLOGY (an endpoints file names none)."""
    return routing.source if routing.source != routing.endpoints_file else "TOPOLOGY"
