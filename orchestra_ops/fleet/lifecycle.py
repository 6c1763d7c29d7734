"""Bringing a fleet up on every node it names (`ops up`); teardown.py brings it down. The CLI commands
are thin layers over both.

    up:   load + plan (+ the retrieval indexes to build, indexes.py; the gateway, if any, set aside)
          -> one NodeGroup per node, each with its own backend (local, tmux, ssh, slurm)
          -> up already with some processes dead: restart only those (repair.py), done
          -> refuse if already up -> preflight every node in parallel (ports, commands, ssh reach,
          slurm partition): any problem stops `ops up` before anything starts anywhere
          -> each node's own vLLM parses every vLLM model's exact argv (argv_check.py; a slurm node's job
          does it first thing): a refusal is vLLM's message at the topology line, exit 2
          -> build the missing retrieval indexes from their corpora (with progress)
          -> launch every node in parallel; state.json after each (status "up", before waiting, so
          `ops down` works after a crash) -> wait until every process is READY (readiness.py)
          -> model_config.json once every host is known -> the gateway (it routes over that file), ready.
          A failure anywhere stops what this `ops up` started everywhere (teardown.stop_fleet; unless
          --keep-on-failure).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from orchestra_ops.config.loader import load_topology
from orchestra_ops.core import procs
from orchestra_ops.core.paths import state_path
from orchestra_ops.errors import LaunchError, OpsError, ReadinessError
from orchestra_ops.fleet import argv_check, argv_check_nodes
from orchestra_ops.fleet.backends import Backends
from orchestra_ops.fleet.backends.base import LaunchContext, NodeGroup
from orchestra_ops.fleet.endpoints import read_endpoints, write_endpoints, write_fleet_endpoints
from orchestra_ops.fleet.indexes import BuildProgress, missing_indexes
from orchestra_ops.fleet.indexes import build as build_index
from orchestra_ops.fleet.node_groups import node_groups
from orchestra_ops.fleet.plan import LaunchPlan, plan
from orchestra_ops.fleet.readiness import Progress, ProgressCallback, poll_nodes, wait_ready
from orchestra_ops.fleet.repair import refuse_changes, restart, split_running, survey
from orchestra_ops.fleet.state import FleetState, read_state, write_state
from orchestra_ops.fleet.teardown import stop_fleet

log = logging.getLogger(__name__)

__all__ = ["Progress", "UpOptions", "UpResult", "up"]


@dataclass(frozen=True)
class UpOptions:
    backend: str | None = None  # for nodes on this machine (local | tmux); default: the topology's
    timeout_s: float | None = None  # default: defaults.ready_timeout_s
    wait: bool = True
    replace: bool = False
    keep_on_failure: bool = False
    endpoints_out: Path | None = None
    tmux_socket: str | None = None
    stop_timeout_s: float = 15.0


@dataclass
class UpResult:
    state: FleetState
    endpoints_file: Path | None
    ready_s: float | None
    warnings: list[str] = field(default_factory=list)
    restarted: list[str] = field(default_factory=list)  # a repair: only these were started again
    kept: list[str] = field(default_factory=list)  # a repair: these kept running (their pids unchanged)
    external: list[str] = field(default_factory=list)  # our pid gone, the port serving: left alone
    already_up: bool = False  # it was up and serving as the file says: nothing was started
    adapters: list[str] = field(default_factory=list)  # a repair: runtime adapters loaded again into the new ones


WarningCallback = Callable[[str], None]


def up(topology_file: str | Path, options: UpOptions | None = None, *,
       on_progress: ProgressCallback | None = None, on_warning: WarningCallback | None = None,
       on_index_progress: BuildProgress | None = None) -> UpResult:
    """Launch every process of a topology, record it, wait until all serve, write the endpoints file.
    A retrieval index that is missing is built from its service's corpus first (indexes.py)."""
    opts = options or UpOptions()
    started = time.monotonic()  # "ready in" counts the whole command: checks, index builds, launch and wait
    warn = on_warning or (lambda message: log.warning("%s", message))
    source = Path(topology_file).resolve()
    topology = load_topology(source)
    launch_plan = plan(topology)
    builds = missing_indexes(source, topology, launch_plan)  # a missing index without a corpus fails here
    fleet_plan, gateway_plan = split_gateway(launch_plan)
    groups = node_groups(topology, fleet_plan, opts.backend or topology.backend)
    gateway_groups = node_groups(topology, gateway_plan, opts.backend or topology.backend)
    if not groups:
        raise LaunchError(f"{source}: nothing to start (no models or services)")
    cwd = Path.cwd()
    ctx = LaunchContext(topology=topology.name, cwd=cwd, nofile=topology.defaults.ulimit_nofile,
                        log_dir=launch_plan.log_dir, tmux_socket=opts.tmux_socket)
    warnings = []
    if any(group.backend in ("local", "tmux") for group in groups):
        warnings = [w for w in [procs.nofile_limit(topology.defaults.ulimit_nofile).warning()] if w]
    for message in warnings:
        warn(message)
    with Backends() as backends:
        repaired = None if opts.replace else _repair(topology.name, source, opts, backends, on_progress,
                                                      launch_plan, topology.defaults.ready_timeout_s)
        if repaired is not None:
            repaired.ready_s = None if repaired.ready_s is None else time.monotonic() - started
            return repaired
        _check_not_up(topology.name, opts, warn, backends)
        _preflight(groups + gateway_groups, backends, ctx)
        engines = argv_check_nodes.check_topology_engines(source, topology, groups, backends, ctx)
        for check in engines:
            if check.skipped:
                warn(f"{check.process}: vLLM did not check its command before launch ({check.skipped})")
        for job in builds:
            build_index(job, on_index_progress)
        state = FleetState(
            name=topology.name, topology_file=str(source), backend=opts.backend or topology.backend, status="up",
            started_at=time.time(), cwd=str(cwd),
            provider_key_envs=sorted({p.api_key_env for p in topology.providers.values() if p.api_key_env}),
            engine_versions=argv_check.versions(engines),
        )
        state = _launch(groups, backends, ctx, state, opts.stop_timeout_s)
        ready_s: float | None = None
        if opts.wait:
            timeout = opts.timeout_s if opts.timeout_s is not None else topology.defaults.ready_timeout_s
            try:
                state = asyncio.run(wait_ready(backends, state, timeout, on_progress, on_state=_save))
            except ReadinessError as exc:
                if opts.keep_on_failure:
                    raise ReadinessError(f"{exc}\nthe other processes are left running (`ops down "
                                         f"{topology.name}` stops them)") from None
                report = stop_fleet(state, backends, opts.stop_timeout_s)
                write_state(state.with_status("down", stopped_at=time.time()))
                note = "fleet stopped" if report.clean else f"fleet stopped, but: {report.problems()}"
                raise ReadinessError(f"{exc}\n{note} (--keep-on-failure leaves it running)") from None
            ready_s = time.monotonic() - started
        else:
            state = refresh_hosts(state, backends)
        out = write_fleet_endpoints(state, opts.endpoints_out)
        if out is None:
            waiting = ", ".join(n.name for n in state.nodes if n.host is None)
            warnings.append(f"no endpoints file yet: nodes {waiting} have no host until their slurm jobs run "
                            "(`ops health` writes it once they do)"
                            + ("; start the gateway then with `ops restart gateway`" if gateway_groups else ""))
            warn(warnings[-1])
        elif gateway_groups:  # it routes over the endpoints file: started once the fleet serves
            state = _launch(gateway_groups, backends, ctx, state, opts.stop_timeout_s)
            if opts.wait:
                timeout = opts.timeout_s if opts.timeout_s is not None else topology.defaults.ready_timeout_s
                gateway_only = replace(state, processes=[r for r in state.processes if r.kind == "gateway"])
                try:
                    asyncio.run(wait_ready(backends, gateway_only, timeout, on_progress))
                except ReadinessError as exc:
                    if not opts.keep_on_failure:
                        stop_fleet(state, backends, opts.stop_timeout_s)
                        write_state(state.with_status("down", stopped_at=time.time()))
                        raise ReadinessError(f"{exc}\nfleet stopped (--keep-on-failure leaves it running)") from None
                    raise
                ready_s = time.monotonic() - started
    state = replace(state, ready_at=time.time() if opts.wait else None,
                    endpoints_file=None if out is None else str(out))
    write_state(state)
    return UpResult(state=state, endpoints_file=out, ready_s=ready_s, warnings=warnings)


def split_gateway(launch_plan: LaunchPlan) -> tuple[LaunchPlan, LaunchPlan]:
    """(the plan without the gateway, the gateway alone): the gateway starts once the rest serves."""
    rest = tuple(spec for spec in launch_plan.processes if spec.kind != "gateway")
    gateway = tuple(spec for spec in launch_plan.processes if spec.kind == "gateway")
    return replace(launch_plan, processes=rest), replace(launch_plan, processes=gateway)


def _save(state: FleetState) -> None:
    write_state(state)


def refresh_hosts(state: FleetState, backends: Backends) -> FleetState:
    """Poll every node once; record hosts that became known (a slurm job that started) in state.json."""
    views = asyncio.run(poll_nodes(backends, state))
    updated = state
    for view in views:
        if view.node.host and view.node.host != updated.node(view.node.name).host:
            updated = updated.with_node(view.node)
    if updated is not state:
        write_state(updated)
    return updated


def _preflight(groups: list[NodeGroup], backends: Backends, ctx: LaunchContext) -> None:
    with ThreadPoolExecutor(max_workers=len(groups)) as pool:
        results = list(pool.map(lambda g: backends.get(g.backend).preflight(g, ctx), groups))
    problems = [problem for result in results for problem in result]
    if problems:
        raise LaunchError("refusing to launch:\n" + "\n".join(problems))


def _launch(groups: list[NodeGroup], backends: Backends, ctx: LaunchContext, state: FleetState,
            stop_timeout: float) -> FleetState:
    """Launch every node in parallel; state.json after each. A failure stops what the others started."""
    names = [*(r.name for r in state.processes), *(spec.name for g in groups for spec in g.specs)]
    order = {name: index for index, name in enumerate(dict.fromkeys(names))}
    node_names = [*(n.name for n in state.nodes), *(group.name for group in groups)]
    node_order = {name: index for index, name in enumerate(dict.fromkeys(node_names))}
    lock = threading.Lock()
    current = [state]

    def one(group: NodeGroup) -> None:
        launched = backends.get(group.backend).launch(group, ctx)
        with lock:
            now = current[0]
            known = {n.name for n in now.nodes}  # a second launch on a node (the gateway) keeps its record
            added = [] if launched.node.name in known else [launched.node]
            nodes = sorted([*now.nodes, *added], key=lambda n: node_order[n.name])
            records = sorted([*now.processes, *launched.processes], key=lambda r: order[r.name])
            current[0] = replace(now, nodes=nodes, processes=records)
            write_state(current[0])

    with ThreadPoolExecutor(max_workers=len(groups)) as pool:
        futures = [(group, pool.submit(one, group)) for group in groups]
        failures: list[tuple[NodeGroup, BaseException]] = []
        for group, future in futures:
            error = future.exception()
            if error is not None:
                failures.append((group, error))
    if not failures:
        return current[0]
    report = stop_fleet(current[0], backends, stop_timeout)
    write_state(current[0].with_status("down", stopped_at=time.time()))
    for _, error in failures:
        if not isinstance(error, OpsError):
            raise error  # a bug: the fleet is stopped, show the traceback
    lines = [str(error) if str(error).startswith("node ") else f"{group.describe()}: {error}"
             for group, error in failures]
    started = [node.name for node in current[0].nodes]
    note = (f"stopped what had started on {', '.join(started)}" if started else "nothing was started")
    if not report.clean:
        note += f", but: {report.problems()}"
    raise LaunchError("\n".join(lines) + f"\n{note}")


def _repair(name: str, source: Path, opts: UpOptions, backends: Backends,
            on_progress: ProgressCallback | None, launch_plan: LaunchPlan, ready_timeout_s: float) -> UpResult | None:
    """`ops up` on a fleet of this file that is up as the file says: all alive is already up (wait until all
    serve), some dead are restarted. None: not up, all gone, or another file (a changed file: LaunchError)."""
    if not state_path(name).exists():
        return None
    old = read_state(name)
    if old.status != "up" or Path(old.topology_file) != source:
        return None
    found = survey(old, backends)
    if found.alive:
        refuse_changes(old, launch_plan)
    if found.alive and not found.dead and not found.external:
        timeout = opts.timeout_s if opts.timeout_s is not None else ready_timeout_s
        ready = asyncio.run(wait_ready(backends, old, timeout, on_progress)) if opts.wait else old
        if opts.endpoints_out is not None and ready.endpoints_file:
            write_endpoints(opts.endpoints_out, read_endpoints(ready.endpoints_file))
        return UpResult(state=ready, endpoints_file=Path(ready.endpoints_file) if ready.endpoints_file else None,
                        ready_s=0.0 if opts.wait else None, kept=found.alive, already_up=True)
    if not found.alive or not found.dead:
        return None
    done = restart(old, found.dead, backends, timeout_s=opts.timeout_s, stop_timeout_s=opts.stop_timeout_s,
                   on_progress=on_progress)
    if opts.endpoints_out is not None and done.endpoints_file is not None:
        write_endpoints(opts.endpoints_out, read_endpoints(done.endpoints_file))
    return UpResult(state=done.state, endpoints_file=done.endpoints_file, ready_s=done.ready_s,
                    restarted=done.names, kept=[n for n in found.alive if n not in found.dead],
                    external=found.external, adapters=done.adapters)


def _check_not_up(name: str, opts: UpOptions, warn: WarningCallback, backends: Backends) -> None:
    if not state_path(name).exists():
        return
    old = read_state(name)
    if old.status != "up":
        return
    alive = split_running(old, backends)[0]
    if alive and not opts.replace:
        raise LaunchError(f"topology '{name}' is already up ({len(alive)} of {len(old.processes)} processes "
                          f"alive: {', '.join(alive[:4])}{' …' if len(alive) > 4 else ''}); "
                          f"`ops down {name}` first, or `ops up --replace`")
    report = stop_fleet(old, backends, opts.stop_timeout_s)  # stale leftovers (a session, a job) go too
    write_state(old.with_status("down", stopped_at=time.time()))
    if not report.clean:
        raise LaunchError(f"could not stop the previous '{name}': {report.problems()}")
    if alive:
        warn(f"replaced the running '{name}' ({len(alive)} processes stopped)")
