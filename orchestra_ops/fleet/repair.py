"""Repairing a fleet that is up: restart the processes that died (`ops up` again) or one by name
(`ops restart NAME`), leaving every other process (and its pid) alone.

    survey:  poll every node through its backend; a process whose recorded pid is gone is DEAD,
             unless its port still serves what it should: then it is EXTERNAL (someone started a
             replica by hand there), and it is left alone (restarting it would fight for the port)
    restart: stop the named processes (if they still run), start each again from the topology's
             current plan on its node (a new tmux window in the node's session, or a new child),
             wait until they serve, load the runtime adapters `ops lora load` had put into their
             model again (lora/reload.py: all or none per adapter), record them in state.json and
             rewrite the endpoints file (runtime adapters included). An adapter that cannot go back
             in is unloaded from the model's other replicas too and reported (exit 3) once the fleet
             is recorded as repaired.

Only nodes on this machine (local, tmux) are repaired one process at a time; an ssh or slurm node
is restarted as a whole with `ops up --replace`. Processes that step together (a model's Ray TP×PP group,
the DP ranks of vLLM's hybrid/external modes: `ProcessRecord.domain`) are one failure domain: one of them
dead restarts all of them (`with_failure_domains`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from orchestra_ops.config.loader import load_topology
from orchestra_ops.config.placement import machine_node
from orchestra_ops.core.paths import endpoints_path
from orchestra_ops.errors import LaunchError
from orchestra_ops.fleet.backends import Backends
from orchestra_ops.fleet.backends.base import LaunchContext, NodeGroup
from orchestra_ops.fleet.backends.localprocs import check_here, stop_records
from orchestra_ops.fleet.endpoints import fleet_endpoints, write_endpoints
from orchestra_ops.fleet.lora.reload import adapters_of, reload_adapters, runtime_endpoints
from orchestra_ops.fleet.plan import plan
from orchestra_ops.fleet.probes import State, probe_all
from orchestra_ops.fleet.process_spec import ProcessSpec
from orchestra_ops.fleet.readiness import ProgressCallback, poll_nodes, target_of, wait_ready
from orchestra_ops.fleet.state import FleetState, ProcessRecord, read_state, resolve_name, write_state

REPAIRABLE = ("local", "tmux")  # backends whose processes are psutil-visible here, one by one


@dataclass(frozen=True)
class Survey:
    """A fleet that is up, process by process, as its backends and its ports show it now."""

    alive: list[str]  # running (or waiting in a slurm queue, or on a node we cannot reach to tell)
    dead: list[str]  # our process is gone and nothing serves on its port, and every process of its group
    external: list[str]  # our process is gone but its port serves the model: not ours, left alone


@dataclass(frozen=True)
class Restarted:
    state: FleetState
    names: list[str]
    ready_s: float
    endpoints_file: Path | None
    adapters: list[str] = field(default_factory=list)  # runtime adapters loaded again: "'ft' into answer/1"


def split_running(state: FleetState, backends: Backends) -> tuple[list[str], list[ProcessRecord]]:
    """(names of the processes that may be running: alive, waiting in a slurm queue, or on a node we
    cannot reach to tell; the records of the others, which are gone)."""
    alive: list[str] = []
    gone: list[ProcessRecord] = []
    for view in asyncio.run(poll_nodes(backends, state)):
        unreachable = view.state == "unreachable"
        for record in state.processes_of(view.node.name):
            process = view.processes.get(record.name)
            if unreachable or view.waiting(record.name) or (process is not None and process.alive):
                alive.append(record.name)
            else:
                gone.append(record)
    return alive, gone


def survey(state: FleetState, backends: Backends) -> Survey:
    alive, gone = split_running(state, backends)
    probes = asyncio.run(probe_all([target_of(r, alive=False) for r in gone if r.host], metrics=False))
    external = [p.name for p in probes if p.state is State.EXTERNAL]
    dead = with_failure_domains(state, [r.name for r in gone if r.name not in external])
    order = [r.name for r in state.processes]
    return Survey(alive=sorted(alive, key=order.index), dead=dead, external=external)


def with_failure_domains(state: FleetState, names: Sequence[str]) -> list[str]:
    """`names` and every process that steps together with one of them (a Ray TP×PP group, the DP ranks of a
    MoE): one member down takes the group down, so the whole group restarts, in state order."""
    domains = {r.domain for r in state.processes if r.name in names and r.domain}
    return [r.name for r in state.processes if r.name in names or (r.domain is not None and r.domain in domains)]


def restart(state: FleetState, names: Sequence[str], backends: Backends, *, timeout_s: float | None = None,
            stop_timeout_s: float = 15.0, on_progress: ProgressCallback | None = None) -> Restarted:
    """Stop (if running) and start again the processes `names` of `state`; wait until they serve."""
    topology = load_topology(state.topology_file)
    launch_plan = plan(topology)
    specs = {spec.name: spec for spec in launch_plan.processes}
    old = [state.by_name(name) for name in names]
    for record in old:
        _check_repairable(state, record, specs.get(record.name))
    adapters = adapters_of(state, names)  # before the restart: afterwards lora.json no longer matches the pids
    stopped = stop_records(old, stop_timeout_s)
    if stopped.leftovers:
        raise LaunchError(f"could not stop {', '.join(names)} before restarting: {stopped.problems()}")
    if stopped.ports_listening:  # ours are gone, yet the port answers: someone else's process holds it
        raise LaunchError(f"cannot restart {', '.join(names)}: {'; '.join(stopped.ports_listening)}, not a "
                          "process ops started (a replica started by hand?); stop it first")
    fresh: list[ProcessRecord] = []
    for node_name in dict.fromkeys(record.node for record in old):
        node = state.node(node_name)
        group = NodeGroup(name=node_name, backend=node.backend, node=machine_node(topology, node_name),
                          specs=tuple(specs[r.name] for r in old if r.node == node_name))
        problems = check_here(group)
        if problems:
            raise LaunchError("cannot restart:\n" + "\n".join(problems))
        ctx = LaunchContext(topology=state.name, cwd=Path(state.cwd), nofile=topology.defaults.ulimit_nofile,
                            log_dir=launch_plan.log_dir, tmux_socket=node.handle.get("socket"))
        fresh.extend(backends.get(node.backend).launch(group, ctx).processes)
    by_name = {record.name: record for record in fresh}
    state = replace(state, processes=[by_name.get(r.name, r) for r in state.processes])
    write_state(state)  # the new pids are recorded before waiting: `ops down` finds them after a crash
    started = time.monotonic()
    timeout = timeout_s if timeout_s is not None else topology.defaults.ready_timeout_s
    asyncio.run(wait_ready(backends, replace(state, processes=fresh), timeout, on_progress))
    ready_s = time.monotonic() - started
    reloaded = reload_adapters(adapters, state, names)
    endpoints = _endpoints(state)
    state = replace(state, ready_at=time.time(), endpoints_file=str(endpoints) if endpoints else state.endpoints_file)
    write_state(state)
    if reloaded.failures:
        raise LaunchError(f"{', '.join(names)} restarted and serving, but:\n" + "\n".join(reloaded.failures))
    return Restarted(state=state, names=list(names), ready_s=ready_s, endpoints_file=endpoints,
                     adapters=reloaded.reloaded)


def restart_one(process: str, topology: str | None = None, *, timeout_s: float | None = None,
                on_progress: ProgressCallback | None = None) -> Restarted:
    """`ops restart NAME`: restart one process (`answer/1`, `answer-1`, or a service) of a fleet that is up."""
    state = read_state(resolve_name(topology))
    if state.status != "up":
        raise LaunchError(f"topology '{state.name}' is down; `ops up {state.topology_file}` first")
    names = [r.name for r in state.processes if process in (r.name, r.name.replace("/", "-"))]
    name = names[0] if names else state.by_name(process).name  # by_name raises, naming the known processes
    with Backends() as backends:  # a member of a group that steps together restarts with its group
        return restart(state, with_failure_domains(state, [name]), backends, timeout_s=timeout_s,
                       on_progress=on_progress)


def _check_repairable(state: FleetState, record: ProcessRecord, spec: ProcessSpec | None) -> None:
    backend = state.node(record.node).backend
    if backend not in REPAIRABLE:
        raise LaunchError(f"{record.name} runs on node {record.node} ({backend}): only processes on this machine "
                          f"(local, tmux) restart one by one; `ops up --replace {state.topology_file}` restarts all")
    if spec is None or (spec.port, spec.node) != (record.port, record.node):
        raise LaunchError(f"{record.name}: {state.topology_file} changed since `ops up` (the process is no longer "
                          "planned there); `ops up --replace` to start the fleet as the file says now")


def _endpoints(state: FleetState) -> Path | None:
    endpoints = fleet_endpoints(state)
    if endpoints is None:
        return None
    return write_endpoints(endpoints_path(state.name), {**endpoints, **runtime_endpoints(state)})
