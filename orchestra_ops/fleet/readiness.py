"""Waiting until every process of a fleet serves, on whatever nodes and backends it runs.

Each round polls every node through its backend (in threads, concurrently: liveness, new log bytes,
a slurm job's state and host) and probes every started process over HTTP (health.probe). It fails at
once, with the log tail and the reproduce command, when a process exits, logs a fatal line, or its
node fails as a whole (a slurm job cancelled or out of time, an ssh host gone); at the timeout it
names what each process was still doing (a slurm job's pending reason included).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from orchestra_ops.core.logtail import is_fatal
from orchestra_ops.errors import OpsError, ReadinessError
from orchestra_ops.fleet.backends import Backends
from orchestra_ops.fleet.backends.base import NodeView
from orchestra_ops.fleet.probes import Probe, State, Target, probe
from orchestra_ops.fleet.state import FleetState, NodeRecord, ProcessRecord

POLL_S = 0.1  # between readiness rounds (backends throttle their own costly polls)
TAIL_LINES = 20


@dataclass(frozen=True)
class Progress:
    """One readiness round: how many serve, the ones still pending (name, state, detail), node notes."""

    ready: int
    total: int
    elapsed_s: float
    pending: list[tuple[str, str, str]]
    nodes: list[str] = field(default_factory=list)  # e.g. "gpu8: slurm job 12 PENDING (Resources)"


ProgressCallback = Callable[[Progress], None]
StateCallback = Callable[[FleetState], None]


class FatalFeed:
    """Log bytes in, the first fatal line out (lines split across reads are joined first)."""

    def __init__(self) -> None:
        self._partial = b""

    def feed(self, data: bytes) -> str | None:
        if not data:
            return None
        *complete, self._partial = (self._partial + data).split(b"\n")
        for raw in complete:
            line = raw.decode("utf-8", errors="replace")
            if is_fatal(line):
                return line.strip()
        return None


def target_of(record: ProcessRecord, alive: bool = True, waiting: str | None = None) -> Target:
    return Target(name=record.name, host=record.host or "", port=record.port, kind=record.kind,
                  served_model_name=record.served_model_name, pid=record.pid, alive=alive, waiting=waiting)


async def poll_nodes(backends: Backends, state: FleetState,
                     offsets: dict[str, int] | None = None) -> list[NodeView]:
    """Every node's view, polled concurrently (each backend call may block: ssh, squeue)."""

    def one(node: NodeRecord) -> NodeView:
        return backends.get(node.backend).poll(node, state.processes_of(node.name), offsets)

    return list(await asyncio.gather(*(asyncio.to_thread(one, node) for node in state.nodes)))


async def wait_ready(backends: Backends, state: FleetState, timeout: float,
                     on_progress: ProgressCallback | None = None,
                     on_state: StateCallback | None = None) -> FleetState:
    """Poll and probe until every process is READY; return the state (slurm hosts filled in)."""
    started = time.monotonic()
    pending = {record.name for record in state.processes}
    offsets = {record.name: record.log_offset for record in state.processes}
    feeds = {record.name: FatalFeed() for record in state.processes}
    limits = httpx.Limits(max_connections=max(16, 2 * len(pending)), max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=5.0, limits=limits, trust_env=False) as client:
        while True:
            views = await poll_nodes(backends, state, offsets)
            for view in views:
                if view.node != state.node(view.node.name):
                    state = state.with_node(view.node)
                    if on_state is not None:
                        on_state(state)
            for view in views:
                _fail_if_broken(backends, state, view, pending, offsets, feeds, started)
            by_node = {view.node.name: view for view in views}
            waiting = {r.name: by_node[r.node].state for r in state.processes
                       if r.name in pending and (r.host is None or by_node[r.node].waiting(r.name))}
            probes: list[Probe] = await asyncio.gather(*(
                probe(client, target_of(r, waiting=waiting.get(r.name)), metrics=False)
                for r in state.processes if r.name in pending))
            for result in probes:
                if result.state is State.READY:
                    pending.discard(result.name)
            elapsed = time.monotonic() - started
            if on_progress is not None:
                notes = [f"{v.node.name}: {v.state}" for v in views if v.state and v.node.host is None]
                on_progress(Progress(ready=len(state.processes) - len(pending), total=len(state.processes),
                                     elapsed_s=elapsed, pending=[_pending_view(p) for p in probes
                                                                 if p.state is not State.READY], nodes=notes))
            if not pending:
                return state
            if elapsed > timeout:
                raise timeout_error(backends, state, [r for r in state.processes if r.name in pending], probes,
                                    views, timeout)
            await asyncio.sleep(POLL_S)


def _pending_view(result: Probe) -> tuple[str, str, str]:
    """A live process whose port is still closed is starting, not down."""
    if result.state is State.DOWN:
        return result.name, State.STARTING.value, "port not open yet"
    return result.name, result.state.value, result.detail


def _fail_if_broken(backends: Backends, state: FleetState, view: NodeView, pending: set[str],
                    offsets: dict[str, int], feeds: dict[str, FatalFeed], started: float) -> None:
    records = [r for r in state.processes_of(view.node.name) if r.name in pending]
    for record in records:
        process = view.processes.get(record.name)
        if process is None:
            continue
        if process.log_end is not None:
            offsets[record.name] = process.log_end
        line = feeds[record.name].feed(process.log)
        if process.started and not process.alive and view.failure is None:
            how = "exited" if process.exit_code is None else f"exited with status {process.exit_code}"
            raise ReadinessError(failure_message(backends, view.node, record, f"{how} before it was serving",
                                                 started))
        if line is not None:
            raise ReadinessError(failure_message(backends, view.node, record, f"logged a fatal line: {line}",
                                                 started))
    if view.failure is not None and records:
        body = "\n".join(f"    {line}" for line in view.failure_log) or "    (empty)"
        where = view.node.handle.get("job_log")
        lines = [f"node {view.node.name}: {view.failure} while {len(records)} processes were not serving yet "
                 f"(after {time.monotonic() - started:.1f} s)"]
        if view.failure_log:
            lines.append(f"  last {len(view.failure_log)} lines of {where or 'its log'}:\n{body}")
        raise ReadinessError("\n".join(lines))


def _tail(backends: Backends, node: NodeRecord, record: ProcessRecord) -> list[str]:
    try:
        return backends.get(node.backend).tail(node, record, TAIL_LINES, settle=True)
    except OpsError as exc:
        return [f"(could not read the log: {exc})"]


def failure_message(backends: Backends, node: NodeRecord, record: ProcessRecord, what: str, started: float) -> str:
    lines = _tail(backends, node, record)
    body = "\n".join(f"    {line}" for line in lines) or "    (empty)"
    return (f"{record.name} {what} (node {record.node}, after {time.monotonic() - started:.1f} s)\n"
            f"  last {len(lines)} lines of {record.log}:\n{body}\n"
            f"  reproduce:\n    {record.reproduce}")


def timeout_error(backends: Backends, state: FleetState, pending: list[ProcessRecord], probes: list[Probe],
                  views: list[NodeView], timeout: float) -> ReadinessError:
    by_name = {p.name: p for p in probes}
    lines = [f"{len(pending)} processes not serving after {timeout:.0f} s:"]
    for record in pending:
        result = by_name.get(record.name)
        if result is not None and result.state is State.PENDING:
            status = result.detail  # e.g. "slurm job 8 PENDING (Resources)"
        else:
            status = f"{result.state.value} {result.detail}".strip() if result else "?"
        where = f"{record.host}:{record.port}" if record.host else f"node {record.node}, no host yet"
        lines.append(f"  {record.name} ({where}): {status}; log {record.log}")
    for view in views:
        if view.state and view.node.host is not None and any(r.node == view.node.name for r in pending):
            lines.append(f"  node {view.node.name}: {view.state}")
    first = next((r for r in pending if r.host is not None), None)
    if first is not None:
        node = state.node(first.node)
        lines += [f"  last lines of {first.log}:", *(f"    {line}" for line in _tail(backends, node, first)),
                  f"  reproduce:\n    {first.reproduce}"]
    return ReadinessError("\n".join(lines))
