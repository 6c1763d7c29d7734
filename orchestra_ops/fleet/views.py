"""What `ops health`, `ops status` and `ops logs` show: a fleet's nodes and processes, asked of the
backend that owns each node (local psutil, tmux, ssh to the node, squeue), then probed over HTTP.

Looking also records what changed: a slurm job that started since `ops up --no-wait` gets its host
written to state.json, and the endpoints file once every host is known.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from orchestra_ops.errors import StateError
from orchestra_ops.fleet.backends import Backends
from orchestra_ops.fleet.backends.base import NodeView, ProcessView
from orchestra_ops.fleet.endpoints import write_fleet_endpoints
from orchestra_ops.fleet.probes import DEFAULT_PROBE_TIMEOUT_S, Probe, State, probe_all
from orchestra_ops.fleet.readiness import poll_nodes, target_of
from orchestra_ops.fleet.state import FleetState, ProcessRecord, read_state, resolve_name, write_state

# Variables that send requests to an external provider (keys or base URLs). Only names are reported.
PROVIDER_ENV_VARS: tuple[str, ...] = (
    "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE", "AZURE_OPENAI_API_KEY", "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY", "GOOGLE_API_KEY", "MISTRAL_API_KEY", "TOGETHER_API_KEY", "GROQ_API_KEY",
    "DEEPSEEK_API_KEY", "OPENROUTER_API_KEY", "FIREWORKS_API_KEY", "HF_TOKEN",
)


def undeclared_provider_vars(declared: list[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """Provider variables set in the environment that no provider of the topology names."""
    env = os.environ if environ is None else environ
    return [name for name in PROVIDER_ENV_VARS if env.get(name) and name not in declared]


@dataclass(frozen=True)
class NodeStatus:
    name: str
    backend: str
    host: str | None
    state: str  # e.g. "slurm job 12 RUNNING", "unreachable", "" when there is nothing to say
    problem: str | None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "backend": self.backend, "host": self.host, "state": self.state,
                "problem": self.problem}


def observe(state: FleetState, backends: Backends) -> tuple[FleetState, dict[str, NodeView]]:
    """Every node's view now; hosts that became known are saved (and the endpoints file written)."""
    views = {view.node.name: view for view in asyncio.run(poll_nodes(backends, state))}
    updated = state
    for view in views.values():
        if view.node.host and view.node.host != updated.node(view.node.name).host:
            updated = updated.with_node(view.node)
    if updated is not state and state.status == "up":
        out = write_fleet_endpoints(updated)
        if out is not None:
            updated = replace(updated, endpoints_file=str(out))
        write_state(updated)
    return updated, views


def _observed(name: str | None, *, up_only: bool) -> tuple[FleetState, dict[str, NodeView]]:
    """The topology `name` (default: the most recent) as its backends see it now (see `observe`)."""
    state = read_state(resolve_name(name, up_only=up_only))
    with Backends() as backends:
        return observe(state, backends)


def _process_views(state: FleetState, views: dict[str, NodeView]
                   ) -> Iterator[tuple[ProcessRecord, NodeView | None, ProcessView | None]]:
    """Each process with its node's view and its own (None: no view of the node, or the process not in it)."""
    for record in state.processes:
        view = views.get(record.node)
        yield record, view, view.processes.get(record.name) if view is not None else None


def _node_rows(state: FleetState, views: dict[str, NodeView]) -> list[NodeStatus]:
    return [NodeStatus(name=node.name, backend=node.backend, host=node.host,
                       state=views[node.name].state if node.name in views else "",
                       problem=views[node.name].failure if node.name in views else None) for node in state.nodes]


def gateway_url(state: FleetState) -> str | None:
    """The gateway's base URL (clients use `<url>/v1`), when the topology runs one."""
    record = next((r for r in state.processes if r.kind == "gateway"), None)
    return None if record is None else record.base_url


@dataclass(frozen=True)
class HealthReport:
    topology: str
    probes: list[Probe]
    undeclared_env: list[str]
    nodes: list[NodeStatus]
    placement: dict[str, tuple[str, str]]  # process -> (node, backend)
    layouts: dict[str, dict[str, Any]] = field(default_factory=dict)  # process -> role, ranks, stages, domain
    gateway: str | None = None  # the gateway's URL (not a key of the endpoints file)

    @property
    def all_ready(self) -> bool:
        return bool(self.probes) and all(p.ready for p in self.probes)

    def to_json(self) -> dict[str, Any]:
        processes = []
        for probe in self.probes:
            node, backend = self.placement.get(probe.name, ("", ""))
            processes.append({**probe.to_json(), "node": node, "backend": backend, **self.layouts.get(probe.name, {})})
        return {"topology": self.topology, "processes": processes, "nodes": [n.to_json() for n in self.nodes],
                "gateway": None if self.gateway is None else {"url": self.gateway}}


def health(name: str | None = None, *, timeout_s: float = DEFAULT_PROBE_TIMEOUT_S) -> HealthReport:
    """Probe every process of a topology (default: the most recent one up) concurrently."""
    state, views = _observed(name, up_only=True)
    targets = []
    for record, view, process in _process_views(state, views):
        unreachable = view is not None and view.state == "unreachable"
        waiting = view.state if view is not None and view.waiting(record.name) else None
        alive = unreachable or (process is not None and process.alive and record.host is not None)
        targets.append(target_of(record, alive=alive, waiting=waiting))
    probes = one_failure_domain(state, asyncio.run(probe_all(targets, timeout=timeout_s)))
    return HealthReport(topology=state.name, probes=probes,
                        undeclared_env=undeclared_provider_vars(state.provider_key_envs),
                        nodes=_node_rows(state, views),
                        placement={r.name: (r.node, r.backend) for r in state.processes},
                        layouts={r.name: {"role": r.role, "ranks": r.ranks, "stages": r.stages, "domain": r.domain}
                                 for r in state.processes},
                        gateway=gateway_url(state))


def one_failure_domain(state: FleetState, probes: list[Probe]) -> list[Probe]:
    """Processes that step together (a Ray TP×PP group, vLLM DP ranks of a MoE) are one failure domain: a
    member that is not READY takes every server of its group out (UNHEALTHY, naming the member)."""
    domain = {r.name: r.domain for r in state.processes}
    broken: dict[str, Probe] = {}
    for probe in probes:
        group = domain.get(probe.name)
        if group is not None and not probe.serving and group not in broken:
            broken[group] = probe
    out = []
    for probe in probes:
        cause = broken.get(domain.get(probe.name) or "")
        if cause is not None and cause is not probe and probe.ready:
            probe = replace(probe, state=State.UNHEALTHY,
                            detail=f"{cause.name} of its group is {cause.state.value}: the group serves only whole")
        out.append(probe)
    return out


@dataclass(frozen=True)
class ProcessStatus:
    name: str
    node: str
    backend: str
    pid: int | None
    alive: bool
    state: str  # "running", "exited (status 1)", "PENDING (Resources)", "unreachable", "gone"
    uptime_s: float | None
    host: str | None
    port: int
    log: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "node": self.node, "backend": self.backend, "pid": self.pid,
                "alive": self.alive, "state": self.state,
                "uptime_s": None if self.uptime_s is None else round(self.uptime_s, 1),
                "host": self.host, "port": self.port, "log": self.log}


@dataclass(frozen=True)
class StatusReport:
    state: FleetState
    processes: list[ProcessStatus]
    nodes: list[NodeStatus]

    def to_json(self) -> dict[str, Any]:
        return {"topology": self.state.name, "status": self.state.status,
                "processes": [p.to_json() for p in self.processes], "nodes": [n.to_json() for n in self.nodes],
                "vllm_versions": dict(self.state.engine_versions),
                "gateway": None if (url := gateway_url(self.state)) is None else {"url": url}}


def status(name: str | None = None) -> StatusReport:
    """The process view from state.json and each node's backend (default: the most recent topology up)."""
    state, views = _observed(name, up_only=False)
    rows = []
    for record, view, process in _process_views(state, views):
        alive = process is not None and process.alive
        rows.append(ProcessStatus(name=record.name, node=record.node, backend=record.backend, pid=record.pid,
                                  alive=alive, state=_describe(view, process, record, alive),
                                  uptime_s=process.uptime_s if process is not None and alive else None,
                                  host=record.host, port=record.port, log=record.log))
    return StatusReport(state=state, processes=rows, nodes=_node_rows(state, views))


def _describe(view: NodeView | None, process: ProcessView | None, record: ProcessRecord, alive: bool) -> str:
    if view is None:
        return "?"
    if view.state == "unreachable":
        return "unreachable"
    if view.waiting(record.name):
        return view.state
    if alive:
        return "running"
    if process is not None and process.exit_code is not None:
        return f"exited (status {process.exit_code})"
    return "gone"


def _locate(process: str, topology: str | None) -> tuple[FleetState, ProcessRecord]:
    state = read_state(resolve_name(topology, up_only=False))
    for record in state.processes:
        if process in (record.name, record.name.replace("/", "-")):
            return state, record
    return state, state.by_name(process)  # raises StateError naming the known processes


def log_tail(process: str, topology: str | None = None, lines: int = 50) -> tuple[str, list[str]]:
    """(where the log is, its last lines) of process `process` ("answer/1", or "answer-1" as in the file)."""
    state, record = _locate(process, topology)
    node = state.node(record.node)
    if node.backend != "ssh" and not Path(record.log).is_file():
        raise StateError(f"{record.log}: no such log file")
    with Backends() as backends:
        return _where(state, record), backends.get(node.backend).tail(node, record, lines)


def log_follow(process: str, topology: str | None = None) -> Iterator[str]:
    """Lines appended to the log of `process` from now on (the caller stops with Ctrl-C)."""
    state, record = _locate(process, topology)
    node = state.node(record.node)
    with Backends() as backends:
        yield from backends.get(node.backend).follow(node, record)


def _where(state: FleetState, record: ProcessRecord) -> str:
    node = state.node(record.node)
    return record.log if node.backend != "ssh" else f"{record.log} on {node.host}"

