"""What the backends that start processes on this machine share (local, tmux), and log files here.

Stopping is the same everywhere a process is visible to psutil: `stop_records` snapshots each
recorded process with its descendants and the rest of its process group, SIGTERMs the groups,
waits, SIGKILLs what remains and verifies that nothing is left (processes, listening ports).
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil

from orchestra_ops.core import procs
from orchestra_ops.core.logtail import follow, tail
from orchestra_ops.core.logtail import settle as settle_log
from orchestra_ops.fleet.backends.base import NodeGroup, ProcessView, StopReport
from orchestra_ops.fleet.process_spec import ProcessSpec
from orchestra_ops.fleet.state import NodeRecord, ProcessRecord

log = logging.getLogger(__name__)

LOG_READ_LIMIT = 256 * 1024  # new log bytes read per poll and process (the fatal-line scanner's diet)


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


def check_here(group: NodeGroup) -> list[str]:
    """Ports already taken and commands not found, for processes about to start on this machine."""
    problems = []
    held = procs.listeners(port for spec in group.specs for port in (spec.port, *spec.more_ports))
    for spec in group.specs:
        for port in (spec.port, *spec.more_ports):
            holder = held.get(port) or procs.port_holder(spec.bind_host, port, known=held)
            if holder is not None:
                problems.append(f"{spec.name}: {holder.describe()}")
                break
        path = spec.env.get("PATH", os.environ.get("PATH"))
        missing = missing_executable(resolve_argv(spec.argv), path)
        if missing is None and spec.gate:  # the engine behind the Ray gate (its `ray` is checked by the gate)
            missing = missing_executable(spec.engine_argv, path)
        if missing:
            problems.append(f"{spec.name}: command not found: {missing}")
    return problems


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


def make_record(spec: ProcessSpec, node: str, backend: str, pid: int, argv: Sequence[str], log_file: Path,
                offset: int, handle: dict[str, Any] | None = None) -> ProcessRecord:
    """The record of a just-started session leader; its start time makes the pid a lasting identity.

    Both backends start each process as the leader of a new session (start_new_session, a tmux
    pane), so its process group and session are its pid. They are not read back from the kernel:
    a tmux pane can be caught between fork and setsid, still in the tmux server's group.
    """
    try:
        create_time = procs.start_time(pid)
    except psutil.NoSuchProcess:
        create_time = time.time()  # gone already: a made-up start time keeps it counted as gone
    return ProcessRecord(
        name=spec.name, group=spec.group, kind=spec.kind, node=node, backend=backend, pid=pid, pgid=pid, sid=pid,
        create_time=create_time, host=spec.host or spec.bind_host, port=spec.port, log=str(log_file),
        argv=list(argv), env=dict(spec.env), served_model_name=spec.served_model_name,
        endpoint_key=spec.endpoint_key, adapters=list(spec.adapters), log_offset=offset, handle=dict(handle or {}),
        **spec.layout_fields(),
    )


def alive_here(record: ProcessRecord) -> bool:
    return record.pid is not None and procs.is_alive(record.pid, record.create_time)


def view_here(record: ProcessRecord, alive: bool, log_offsets: Mapping[str, int] | None,
              exit_code: int | None = None) -> ProcessView:
    """A ProcessView of a process on this machine whose log is a file here."""
    uptime = time.time() - record.create_time if alive and record.create_time is not None else None
    data, end = b"", None
    if log_offsets is not None:
        data, end = read_new(record.log, log_offsets.get(record.name, record.log_offset))
    return ProcessView(alive=alive, exit_code=exit_code, uptime_s=uptime, log=data, log_end=end)


def read_new(path: str | Path, offset: int, limit: int = LOG_READ_LIMIT) -> tuple[bytes, int]:
    """The bytes of `path` after `offset` (at most `limit`) and the offset after them."""
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            data = handle.read(limit)
    except OSError:
        return b"", offset
    return data, offset + len(data)


class LocalLogs:
    """tail/follow for backends whose logs are files on this machine (local, tmux, slurm)."""

    def tail(self, node: NodeRecord, record: ProcessRecord, lines: int, *, settle: bool = False) -> list[str]:
        if settle:  # a dying process's last lines may still be on their way (tee, pipes)
            settle_log(record.log)
        return tail(record.log, lines, start=record.log_offset)

    def follow(self, node: NodeRecord, record: ProcessRecord) -> Iterator[str]:
        return follow(record.log)


def _snapshot(record: ProcessRecord) -> list[psutil.Process]:
    """The recorded process, its descendants, and whatever else still lives in its process group."""
    if record.pid is None or record.create_time is None:
        return []
    found: dict[int, psutil.Process] = {}
    leader = procs.find_process(record.pid, record.create_time)
    if leader is not None:
        for proc in procs.process_tree(leader):
            found[proc.pid] = proc
    if record.pgid is not None:
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
        if record.pgid is not None:
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
        report.leftovers += [_describe(p) for p in _snapshot(record) if _describe(p) not in report.leftovers]
    holders = procs.listeners(port for r in records for port in r.all_ports)
    report.ports_listening = [holder.describe() for holder in holders.values()]
    return report


def _describe(proc: psutil.Process) -> str:
    try:
        return f"pid {proc.pid} ({proc.name()})"
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return f"pid {proc.pid}"
