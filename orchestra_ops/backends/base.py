"""What every backend does (launch, stop, status, log path) and the parts they share.

A backend turns ProcessSpecs into running processes and ProcessRecords (pid, process group, start
time, log) and stops them again. Stopping is the same everywhere a process is visible to psutil:
`stop_records` snapshots each recorded process with its descendants and the rest of its process
group, SIGTERMs the groups, waits, SIGKILLs what remains and verifies that nothing is left.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import psutil

from orchestra_ops import procs
from orchestra_ops.plan import ProcessSpec
from orchestra_ops.state import FleetState, ProcessRecord

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LaunchContext:
    """What a backend needs besides the specs: where to run and with which open-file limit."""

    topology: str
    cwd: Path
    nofile: int  # the soft open-file limit every process gets (already capped at the hard limit)


@dataclass
class StopReport:
    """What `stop` did and what it found afterwards; `clean` when nothing of the topology is left."""

    terminated: list[str] = field(default_factory=list)  # exited after SIGTERM
    killed: list[str] = field(default_factory=list)  # needed SIGKILL
    already_gone: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)  # "pid 123 (python3)" still alive
    ports_listening: list[str] = field(default_factory=list)  # PortHolder.describe()
    tmux_session_left: str | None = None

    @property
    def clean(self) -> bool:
        return not self.leftovers and not self.ports_listening and self.tmux_session_left is None


class Backend(Protocol):
    """The seam between the fleet logic and the outside world."""

    name: str

    def launch(self, specs: Sequence[ProcessSpec], ctx: LaunchContext) -> list[ProcessRecord]:
        """Start every spec without waiting for readiness; return one record per process."""

    def stop(self, state: FleetState, timeout: float) -> StopReport:
        """Stop every process of `state` (group SIGTERM, wait, SIGKILL) and verify; idempotent."""

    def alive(self, record: ProcessRecord) -> bool:
        """Is the recorded process (pid and start time) still running?"""

    def log_path(self, record: ProcessRecord) -> Path:
        """The file the process's output is appended to."""


# ---- shared helpers -------------------------------------------------------------------------------


def resolve_argv(argv: Sequence[str]) -> list[str]:
    """A leading `ops` runs this installation (`python -m orchestra_ops`), whatever PATH says."""
    if argv and argv[0] == "ops":
        return [sys.executable, "-m", "orchestra_ops", *argv[1:]]
    return list(argv)


def line_buffered(argv: Sequence[str]) -> list[str]:
    """Prefix `stdbuf -oL -eL` (C stdio line-buffered) when available; the pid stays the same (exec)."""
    stdbuf = shutil.which("stdbuf")
    return [stdbuf, "-oL", "-eL", *argv] if stdbuf else list(argv)


def missing_executable(argv: Sequence[str], env_path: str | None = None) -> str | None:
    """argv[0] when it cannot be found (so nothing is launched for a typo), else None."""
    if not argv:
        return "(empty command)"
    if os.sep in argv[0]:
        return None if os.access(argv[0], os.X_OK) else argv[0]
    return None if shutil.which(argv[0], path=env_path) else argv[0]


def absolute_log(spec: ProcessSpec, cwd: Path) -> Path:
    path = Path(spec.log)
    return path if path.is_absolute() else (cwd / path)


def open_log(path: Path, header: str) -> int:
    """Create the log's directory, append a header line; return the offset where this run starts."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab", buffering=0) as handle:
        offset = handle.tell()
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        handle.write(f"=== {stamp} ops up: {header}\n".encode())
    return offset


def make_record(spec: ProcessSpec, pid: int, argv: Sequence[str], log_file: Path, offset: int,
                tmux_window: str | None = None) -> ProcessRecord:
    """The record of a just-started session leader; its start time makes the pid a lasting identity.

    Both backends start each process as the leader of a new session (start_new_session, a tmux
    pane), so its process group and session are its pid. They are not read back from the kernel:
    a tmux pane can be caught between fork and setsid, still in the tmux server's group.
    """
    try:
        create_time = procs.start_time(pid)
    except psutil.NoSuchProcess:
        create_time = time.time()  # gone already: a made-up start time keeps it counted as gone
    pgid = sid = pid
    return ProcessRecord(
        name=spec.name, group=spec.group, kind=spec.kind, pid=pid, pgid=pgid, sid=sid,
        create_time=create_time, host=spec.host or spec.bind_host, port=spec.port, log=str(log_file),
        argv=list(argv), env=dict(spec.env), served_model_name=spec.served_model_name,
        endpoint_key=spec.endpoint_key, log_offset=offset, tmux_window=tmux_window,
    )


def _snapshot(record: ProcessRecord) -> list[psutil.Process]:
    """The recorded process, its descendants, and whatever else still lives in its process group."""
    found: dict[int, psutil.Process] = {}
    leader = procs.find_process(record.pid, record.create_time)
    if leader is not None:
        for proc in procs.process_tree(leader):
            found[proc.pid] = proc
    for proc in procs.group_members(record.pgid, record.sid, record.create_time):
        found.setdefault(proc.pid, proc)
        for child in procs.process_tree(proc):
            found.setdefault(child.pid, child)
    return list(found.values())


def stop_records(records: Sequence[ProcessRecord], timeout: float) -> StopReport:
    """Group SIGTERM, wait up to `timeout`, SIGKILL the rest, then check processes and ports."""
    report = StopReport()
    owner: dict[int, str] = {}
    everything: list[psutil.Process] = []
    groups: set[int] = set()
    for record in records:
        snapshot = _snapshot(record)
        if not snapshot:
            report.already_gone.append(record.name)
            continue
        for proc in snapshot:
            if proc.pid not in owner:
                owner[proc.pid] = record.name
                everything.append(proc)
        groups.add(record.pgid)
    if everything:
        result = procs.terminate(everything, groups, timeout)
        killed_names = {owner[p.pid] for p in result.killed} | {owner[p.pid] for p in result.survivors}
        for record in records:
            if record.name in report.already_gone:
                continue
            (report.killed if record.name in killed_names else report.terminated).append(record.name)
    report.leftovers = [_describe(p) for p in procs.live(everything)]
    for record in records:
        report.leftovers += [_describe(p) for p in _snapshot(record)
                             if _describe(p) not in report.leftovers]
    holders = procs.listeners(r.port for r in records if r.host in _LOCAL)
    report.ports_listening = [holder.describe() for holder in holders.values()]
    return report


_LOCAL = frozenset({"127.0.0.1", "::1", "localhost", "0.0.0.0"})


def _describe(proc: psutil.Process) -> str:
    try:
        return f"pid {proc.pid} ({proc.name()})"
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return f"pid {proc.pid}"
