"""Bringing a fleet up and down on this machine; the CLI commands are thin layers over this module.

    up:   load + plan -> refuse if already up / a port is taken / a command is missing
          -> launch everything at once -> state.json (status "up", before waiting, so `ops down`
          works after a crash) -> wait until every process is READY, failing at once when one
          exits or logs a fatal line -> model_config.json
    down: group SIGTERM, wait, SIGKILL, verify (processes, ports, tmux session) -> status "down"
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx

from orchestra_ops import procs
from orchestra_ops.backends import backend_for
from orchestra_ops.backends.base import Backend, LaunchContext, StopReport, missing_executable, resolve_argv
from orchestra_ops.endpoints import endpoints_for, write_endpoints
from orchestra_ops.errors import LaunchError, ReadinessError, StateError
from orchestra_ops.health import Probe, State, Target, probe
from orchestra_ops.logtail import FatalScanner, settle, tail
from orchestra_ops.paths import endpoints_path, state_path
from orchestra_ops.plan import LaunchPlan, plan
from orchestra_ops.state import FleetState, ProcessRecord, read_state, resolve_name, write_state
from orchestra_ops.topology import LOCAL_HOSTS, load_topology

log = logging.getLogger(__name__)

POLL_S = 0.1  # between readiness rounds (a round probes every pending process concurrently)
TAIL_LINES = 20


@dataclass(frozen=True)
class Progress:
    """One readiness round: how many serve, and the ones still pending (name, state, detail)."""

    ready: int
    total: int
    elapsed_s: float
    pending: list[tuple[str, str, str]]


@dataclass(frozen=True)
class UpOptions:
    backend: str | None = None  # default: the topology's
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


ProgressCallback = Callable[[Progress], None]
WarningCallback = Callable[[str], None]


def up(topology_file: str | Path, options: UpOptions | None = None, *,
       on_progress: ProgressCallback | None = None, on_warning: WarningCallback | None = None) -> UpResult:
    """Launch every process of a topology, record it, wait until all serve, write the endpoints file."""
    opts = options or UpOptions()
    warn = on_warning or (lambda message: log.warning("%s", message))
    source = Path(topology_file).resolve()
    topology = load_topology(source)
    launch_plan = plan(topology)
    backend_name = opts.backend or topology.backend
    _check_supported(launch_plan, backend_name)
    _check_not_up(topology.name, opts, warn)
    _check_ports_and_commands(launch_plan)
    limit = procs.nofile_limit(topology.defaults.ulimit_nofile)
    warnings = [w for w in [limit.warning()] if w]
    for message in warnings:
        warn(message)

    backend = backend_for(backend_name, topology.name, tmux_socket=opts.tmux_socket)
    cwd = Path.cwd()
    started = time.monotonic()
    records = backend.launch(launch_plan.processes, LaunchContext(topology.name, cwd, limit.effective))
    state = FleetState(
        name=topology.name, topology_file=str(source), backend=backend_name, status="up",
        started_at=time.time(), cwd=str(cwd), processes=records,
        tmux_socket=opts.tmux_socket if backend_name == "tmux" else None,
        tmux_session=getattr(backend, "session", None),
        provider_key_envs=sorted({p.api_key_env for p in topology.providers.values() if p.api_key_env}),
    )
    write_state(state)
    ready_s: float | None = None
    if opts.wait:
        timeout = opts.timeout_s if opts.timeout_s is not None else topology.defaults.ready_timeout_s
        try:
            asyncio.run(wait_ready(backend, state, timeout, on_progress))
        except ReadinessError as exc:
            if opts.keep_on_failure:
                raise ReadinessError(f"{exc}\nthe other processes are left running (`ops down "
                                     f"{topology.name}` stops them)") from None
            report = backend.stop(state, opts.stop_timeout_s)
            write_state(state.with_status("down", stopped_at=time.time()))
            note = "fleet stopped" if report.clean else f"fleet stopped, but: {describe_problems(report)}"
            raise ReadinessError(f"{exc}\n{note} (--keep-on-failure leaves it running)") from None
        ready_s = time.monotonic() - started
    out = _write_endpoints(launch_plan, opts.endpoints_out)
    state = replace(state, ready_at=time.time() if opts.wait else None, endpoints_file=str(out))
    write_state(state)
    return UpResult(state=state, endpoints_file=out, ready_s=ready_s, warnings=warnings)


def _write_endpoints(launch_plan: LaunchPlan, extra: Path | None) -> Path:
    endpoints = endpoints_for(launch_plan)
    out = write_endpoints(endpoints_path(launch_plan.name), endpoints)
    if extra is not None:
        write_endpoints(extra, endpoints)
    return out


def _check_supported(launch_plan: LaunchPlan, backend_name: str) -> None:
    if backend_name not in ("local", "tmux"):
        raise LaunchError(f"backend '{backend_name}' is not available in `ops up` on this machine yet; "
                          "use --backend local or tmux")
    remote = sorted({f"{p.node} ({p.host})" for p in launch_plan.processes
                     if p.host is None or p.host not in LOCAL_HOSTS})
    if remote:
        raise LaunchError(f"nodes {', '.join(remote)} are not this machine; the {backend_name} backend "
                          "starts processes here only")


def _check_not_up(name: str, opts: UpOptions, warn: WarningCallback) -> None:
    if not state_path(name).exists():
        return
    old = read_state(name)
    if old.status != "up":
        return
    old_backend = backend_for(old.backend, old.name, tmux_socket=old.tmux_socket)
    alive = [r.name for r in old.processes if old_backend.alive(r)]
    if alive and not opts.replace:
        raise LaunchError(f"topology '{name}' is already up ({len(alive)} of {len(old.processes)} processes "
                          f"alive: {', '.join(alive[:4])}{' …' if len(alive) > 4 else ''}); "
                          f"`ops down {name}` first, or `ops up --replace`")
    report = old_backend.stop(old, opts.stop_timeout_s)  # stale leftovers (a session, orphans) go too
    write_state(old.with_status("down", stopped_at=time.time()))
    if not report.clean:
        raise LaunchError(f"could not stop the previous '{name}': {describe_problems(report)}")
    if alive:
        warn(f"replaced the running '{name}' ({len(alive)} processes stopped)")


def _check_ports_and_commands(launch_plan: LaunchPlan) -> None:
    problems = []
    held = procs.listeners(spec.port for spec in launch_plan.processes)
    for spec in launch_plan.processes:
        holder = held.get(spec.port) or procs.port_holder(spec.bind_host, spec.port, known=held)
        if holder is not None:
            problems.append(f"{spec.name}: {holder.describe()}")
        missing = missing_executable(resolve_argv(spec.argv), spec.env.get("PATH", os.environ.get("PATH")))
        if missing:
            problems.append(f"{spec.name}: command not found: {missing}")
    if problems:
        raise LaunchError("refusing to launch:\n" + "\n".join(problems))


# ---- readiness ------------------------------------------------------------------------------------


def target_of(record: ProcessRecord, alive: bool = True) -> Target:
    return Target(name=record.name, host=record.host, port=record.port, kind=record.kind,
                  served_model_name=record.served_model_name, pid=record.pid, alive=alive)


async def wait_ready(backend: Backend, state: FleetState, timeout: float,
                     on_progress: ProgressCallback | None = None) -> None:
    """Probe until every process is READY; raise ReadinessError at once when one dies or logs a fatal line."""
    started = time.monotonic()
    pending = {record.name: record for record in state.processes}
    scanners = {record.name: FatalScanner(record.log, record.log_offset) for record in state.processes}
    limits = httpx.Limits(max_connections=max(16, 2 * len(pending)), max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=5.0, limits=limits, trust_env=False) as client:
        while True:
            for record in pending.values():
                _fail_if_broken(backend, record, scanners[record.name], started)
            probes: list[Probe] = await asyncio.gather(
                *(probe(client, target_of(r), metrics=False) for r in pending.values()))
            for result in probes:
                if result.state is State.READY:
                    del pending[result.name]
            elapsed = time.monotonic() - started
            if on_progress is not None:
                waiting = [_pending_view(p) for p in probes if p.state is not State.READY]
                on_progress(Progress(ready=len(state.processes) - len(pending), total=len(state.processes),
                                     elapsed_s=elapsed, pending=waiting))
            if not pending:
                return
            if elapsed > timeout:
                raise _timeout_error(list(pending.values()), probes, timeout)
            await asyncio.sleep(POLL_S)


def _pending_view(result: Probe) -> tuple[str, str, str]:
    """A live process whose port is still closed is starting, not down."""
    if result.state is State.DOWN:
        return result.name, State.STARTING.value, "port not open yet"
    return result.name, result.state.value, result.detail


def _fail_if_broken(backend: Backend, record: ProcessRecord, scanner: FatalScanner, started: float) -> None:
    if not backend.alive(record):
        settle(record.log)
        code = getattr(backend, "exit_code", lambda r: None)(record)
        how = "exited" if code is None else f"exited with status {code}"
        raise ReadinessError(failure_message(record, f"{how} before it was serving", started))
    line = scanner.scan()
    if line is not None:
        settle(record.log)
        raise ReadinessError(failure_message(record, f"logged a fatal line: {line}", started))


def failure_message(record: ProcessRecord, what: str, started: float) -> str:
    lines = tail(record.log, TAIL_LINES, start=record.log_offset)
    body = "\n".join(f"    {line}" for line in lines) or "    (empty)"
    return (f"{record.name} {what} (after {time.monotonic() - started:.1f} s)\n"
            f"  last {len(lines)} lines of {record.log}:\n{body}\n"
            f"  reproduce:\n    {record.reproduce}")


def _timeout_error(pending: list[ProcessRecord], probes: list[Probe], timeout: float) -> ReadinessError:
    by_name = {p.name: p for p in probes}
    lines = [f"{len(pending)} processes not serving after {timeout:.0f} s:"]
    for record in pending:
        result = by_name.get(record.name)
        state = f"{result.state.value} {result.detail}".strip() if result else "?"
        lines.append(f"  {record.name} ({record.host}:{record.port}): {state}; log {record.log}")
    first = pending[0]
    lines += [f"  last lines of {first.log}:",
              *(f"    {line}" for line in tail(first.log, TAIL_LINES, start=first.log_offset)),
              f"  reproduce:\n    {first.reproduce}"]
    return ReadinessError("\n".join(lines))


# ---- down -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DownResult:
    name: str
    was_up: bool
    report: StopReport


def down(name: str | None = None, timeout_s: float = 15.0) -> DownResult | None:
    """Stop a topology (default: the most recent one up) and verify; None when nothing is up."""
    try:
        resolved = resolve_name(name)
    except StateError:
        return None
    state = read_state(resolved)
    backend = backend_for(state.backend, state.name, tmux_socket=state.tmux_socket)
    report = backend.stop(state, timeout_s)
    if state.status == "up":
        write_state(state.with_status("down", stopped_at=time.time()))
    return DownResult(name=state.name, was_up=state.status == "up", report=report)


def describe_problems(report: StopReport) -> str:
    parts = []
    if report.leftovers:
        parts.append(f"still alive: {', '.join(report.leftovers)}")
    if report.ports_listening:
        parts.append("; ".join(report.ports_listening))
    if report.tmux_session_left:
        parts.append(f"tmux session {report.tmux_session_left} still exists")
    return "; ".join(parts)
