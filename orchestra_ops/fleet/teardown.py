"""Bringing a fleet down (`ops down`, and what `ops up` stops when it fails): every node through the backend
that owns it, in parallel: stop, verify -> status "down" in state.json.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from orchestra_ops.errors import OpsError, StateError
from orchestra_ops.fleet.backends import Backends
from orchestra_ops.fleet.backends.base import StopReport
from orchestra_ops.fleet.state import FleetState, read_state, resolve_name, write_state

__all__ = ["DownResult", "down", "stop_fleet"]


def stop_fleet(state: FleetState, backends: Backends, timeout: float) -> StopReport:
    """Stop every node of `state` through its own backend, all nodes at once; one merged report."""
    if not state.nodes:
        return StopReport()

    def one(node_name: str) -> StopReport:
        node = state.node(node_name)
        try:
            return backends.get(node.backend).stop(node, state.processes_of(node.name), timeout)
        except OpsError as exc:
            return StopReport(errors=[f"node {node.name}: {exc}"])

    with ThreadPoolExecutor(max_workers=len(state.nodes)) as pool:
        reports = list(pool.map(one, [node.name for node in state.nodes]))
    merged = StopReport()
    for report in reports:
        merged.merge(report)
    return merged


@dataclass(frozen=True)
class DownResult:
    name: str
    was_up: bool
    report: StopReport
    backends: list[str] = field(default_factory=list)


def down(name: str | None = None, timeout_s: float = 15.0) -> DownResult | None:
    """Stop a topology (default: the most recent one up) and verify; None when nothing is up."""
    try:
        resolved = resolve_name(name)
    except StateError:
        return None
    state = read_state(resolved)
    with Backends() as backends:
        report = stop_fleet(state, backends, timeout_s)
    if state.status == "up" and not report.errors:  # a node we could not reach: still up, `ops down` again
        write_state(state.with_status("down", stopped_at=time.time()))
    return DownResult(name=state.name, was_up=state.status == "up", report=report, backends=state.backends)
