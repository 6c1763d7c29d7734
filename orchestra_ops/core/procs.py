"""Processes, through psutil: identity (pid + start time), trees, group kill, ports, open-file limits.

A pid alone is not an identity: after a crash the kernel may give it to an unrelated process. Every
function here that acts on a recorded process takes its start time (`psutil.Process.create_time()`)
too and treats a pid whose start time differs as gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import resource
import signal
import socket
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import psutil

log = logging.getLogger(__name__)

START_TIME_TOLERANCE_S = 0.05  # create_time() is derived from boot time + ticks; allow rounding


def find_process(pid: int, create_time: float | None) -> psutil.Process | None:
    """The live process with this pid and start time, or None (gone, zombie, or a recycled pid)."""
    try:
        proc = psutil.Process(pid)
        if create_time is not None and abs(proc.create_time() - create_time) > START_TIME_TOLERANCE_S:
            return None
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    return proc


def is_alive(pid: int, create_time: float | None) -> bool:
    return find_process(pid, create_time) is not None


def start_time(pid: int) -> float:
    """`create_time()` of a live pid (raises psutil.NoSuchProcess when it is gone)."""
    return psutil.Process(pid).create_time()


def lineage(pid: int) -> list[psutil.Process]:
    """The live process `pid` and its ancestors, nearest first (empty when it is gone)."""
    try:
        proc = psutil.Process(pid)
        return [proc, *proc.parents()]
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []


def process_tree(proc: psutil.Process) -> list[psutil.Process]:
    """`proc` and all its live descendants."""
    try:
        children = proc.children(recursive=True)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        children = []
    return [proc, *children]


def group_members(pgid: int, sid: int | None, not_before: float) -> list[psutil.Process]:
    """Live processes in process group `pgid` (and session `sid`) started at or after `not_before`.

    Finds what a group leader left behind after it died (vLLM engine-core children holding GPUs).
    The start-time and session guards keep a recycled pgid from pulling in strangers: the kernel does
    not reuse a pid while it is a live group's id, so a live process with pid `pgid` that started at
    another time than `not_before` (the leader's start) means our group is gone and this one is not ours.
    """
    try:
        if abs(psutil.Process(pgid).create_time() - not_before) > START_TIME_TOLERANCE_S:
            return []
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        pass
    members = []
    for proc in psutil.process_iter(["pid", "create_time"]):
        try:
            if os.getpgid(proc.pid) != pgid:
                continue
            if sid is not None and os.getsid(proc.pid) != sid:
                continue
            if proc.info["create_time"] + START_TIME_TOLERANCE_S < not_before:
                continue
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
        except (ProcessLookupError, PermissionError, psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        members.append(proc)
    return members


def live(procs: Iterable[psutil.Process]) -> list[psutil.Process]:
    """The processes of `procs` still running (zombies count as gone)."""
    result = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                result.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return result


@dataclass(frozen=True)
class KillResult:
    terminated: list[psutil.Process]  # exited after SIGTERM
    killed: list[psutil.Process]  # needed SIGKILL
    survivors: list[psutil.Process]  # still alive after SIGKILL (should never happen)


def terminate(procs: Sequence[psutil.Process], pgids: Iterable[int], timeout: float) -> KillResult:
    """SIGTERM the process groups `pgids` and every process in `procs`, wait, SIGKILL what remains.

    Call only with processes verified to be ours (see `group_members`); a group is signalled only
    when one of `procs` is in it, so a stale or wrong pgid never reaches a stranger's group.
    """
    groups = {pgid for pgid in pgids if _group_of(procs, pgid)}  # only groups one of ours is in
    running = live(procs)  # before the signal: one that dies at once is still counted as terminated
    _signal_all(procs, groups, signal.SIGTERM)
    _, alive = psutil.wait_procs(running, timeout=timeout)
    alive = live(alive)
    if alive:
        log.info("SIGKILL to %d processes still alive after %.1f s", len(alive), timeout)
        _signal_all(alive, {g for g in groups if _group_of(alive, g)}, signal.SIGKILL)
        _, still = psutil.wait_procs(alive, timeout=max(2.0, timeout / 2))
        still = live(still)
    else:
        still = []
    killed = [proc for proc in alive if proc not in still]
    terminated = [proc for proc in running if proc not in alive]
    return KillResult(terminated=terminated, killed=killed, survivors=still)


def _group_of(procs: Iterable[psutil.Process], pgid: int) -> bool:
    for proc in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(proc.pid) == pgid:
                return True
    return False


def _signal_all(procs: Iterable[psutil.Process], groups: set[int], sig: signal.Signals) -> None:
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            proc.send_signal(sig)


# ---- ports ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PortHolder:
    port: int
    pid: int | None
    name: str | None

    def describe(self) -> str:
        if self.pid is None:
            return f"port {self.port} is in use (by a process we cannot see)"
        return f"port {self.port} is held by pid {self.pid} ({self.name or '?'})"


def listeners(ports: Iterable[int]) -> dict[int, PortHolder]:
    """Which of `ports` have a TCP socket listening on them, and by whom (pid + name when visible)."""
    wanted = set(ports)
    found: dict[int, PortHolder] = {}
    try:
        conns = psutil.net_connections(kind="tcp")
    except psutil.AccessDenied:
        conns = []
    for conn in conns:
        if conn.status != psutil.CONN_LISTEN or not conn.laddr or conn.laddr.port not in wanted:
            continue
        port = conn.laddr.port
        if port in found and found[port].pid is not None:
            continue
        name = None
        if conn.pid is not None:
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                name = psutil.Process(conn.pid).name()
        found[port] = PortHolder(port=port, pid=conn.pid, name=name)
    return found


def port_holder(host: str, port: int, known: dict[int, PortHolder] | None = None) -> PortHolder | None:
    """Who holds `host:port` so that a server could not bind it, or None when it is free.

    `known`: the result of an earlier `listeners()` call covering `port` (saves a scan per port).
    """
    holder = (known if known is not None else listeners([port])).get(port)
    if holder is not None:
        return holder
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: TIME_WAIT is fine
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return PortHolder(port=port, pid=None, name=None)
            raise
    return None


# ---- open-file limits -----------------------------------------------------------------------------


@dataclass(frozen=True)
class NofileLimit:
    requested: int
    effective: int
    hard: int

    @property
    def capped(self) -> bool:
        return self.effective < self.requested

    def warning(self) -> str | None:
        if not self.capped:
            return None
        return (f"ulimit_nofile {self.requested} is above the hard limit {self.hard}; processes get "
                f"{self.effective} (raise the hard limit with `ulimit -Hn` or limits.conf)")


def nofile_limit(requested: int) -> NofileLimit:
    """The soft open-file limit a child can get for `requested`: min(requested, hard limit)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    effective = requested if hard == resource.RLIM_INFINITY else min(requested, hard)
    return NofileLimit(requested=requested, effective=effective,
                       hard=requested if hard == resource.RLIM_INFINITY else hard)


@contextlib.contextmanager
def soft_nofile(value: int) -> Iterator[None]:
    """Set this process's soft open-file limit to `value` (≤ hard) for the block, so children inherit it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (value, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def raise_nofile(requested: int) -> NofileLimit:
    """Raise this process's soft open-file limit to min(requested, hard); never lowers it."""
    limit = nofile_limit(requested)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < limit.effective:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit.effective, hard))
    return limit


@contextlib.contextmanager
def loop_signal_handlers(loop: asyncio.AbstractEventLoop,
                         handlers: Mapping[signal.Signals, Callable[[], object]]) -> Iterator[None]:
    """`handlers` on `loop` while the block runs (where the loop can take them: not off the main thread),
    removed after it on every exit path."""
    installed = []
    for sig, handler in handlers.items():
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, handler)
            installed.append(sig)
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)

