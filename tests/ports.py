"""Loopback ports for test servers: no two pytest processes (xdist workers, two suites) get the same one.

    port = free_port()                  # a port nothing is bound to, handed to no other process
    first = free_port_block(3)          # first, first+1, first+2: replicas of one model

A port picked by binding port 0 and closing is a race: another xdist worker (or an outgoing connection,
whose source ports come from the same ephemeral range) can get the same number before the server that
was meant to have it binds. So ports come from below the ephemeral range (the kernel never hands those
out on its own), in slices of `SLICE` ports: a process owns a slice while it holds an exclusive `flock`
on its file under `LOCK_DIR` (released by the kernel when the process exits, even on kill -9), and
walks its own slices without ever going back; it takes a new slice when one is used up. Each port is
also checked by binding it on every address (`0.0.0.0`), so a leftover server of a killed run, or
anything else listening there, is skipped.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import socket
import tempfile
import threading
from pathlib import Path

LOWEST = 20000  # below: fixed ports people use (the dev cluster's 16817, topologies' 18xxx)
SLICE = 500  # ports per slice; the whole suite uses a few hundred per worker
LOCK_DIR = Path(tempfile.gettempdir()) / "ops-test-ports"


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (source ports of outgoing connections, port 0)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def bindable(port: int) -> bool:
    """Is `port` bound on no address right now (a bind on 0.0.0.0 fails if it is bound on any)?"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def default_highest() -> int:
    """One past the last port handed out: the start of the ephemeral range (32768 where it is odd)."""
    low = ephemeral_low()
    return low if low >= LOWEST + SLICE else 32768


class PortPool:
    """The slices this process owns and how far it has walked them (one per process: see `_own_pool`)."""

    def __init__(self, lowest: int = LOWEST, highest: int | None = None, *, slice_size: int = SLICE,
                 lock_dir: Path = LOCK_DIR) -> None:
        top = default_highest() if highest is None else highest
        self.slice_size = slice_size
        self.slices = list(range(lowest, top - slice_size + 1, slice_size))
        if not self.slices:
            raise ValueError(f"no slice of {slice_size} ports fits in {lowest}-{top - 1}")
        self.lock_dir = lock_dir
        self.locks: dict[int, int] = {}  # slice start -> the fd that holds its flock (until we exit)
        self.current: int | None = None  # the slice being walked
        self.cursor = 0  # the next port to try in it
        self.mutex = threading.Lock()

    def take(self, count: int) -> int:
        """The first of `count` consecutive ports of this process's slices, each bound nowhere right now."""
        if not 1 <= count <= self.slice_size:
            raise ValueError(f"a block of {count} ports does not fit a slice of {self.slice_size}")
        with self.mutex:
            while True:
                first = self._walk(count)
                if first is not None:
                    return first
                if not self._take_slice():
                    break
            for start in list(self.locks):  # every slice here is owned: walk ours again from the start
                self.current, self.cursor = start, start
                first = self._walk(count)
                if first is not None:
                    return first
        raise RuntimeError(f"no block of {count} free ports in {self.slices[0]}-{self.slices[-1] + self.slice_size - 1}"
                           f" (every slice is locked under {self.lock_dir} or busy)")

    def _walk(self, count: int) -> int | None:
        """The next block of the current slice that is bound nowhere (the cursor moves past it), or None."""
        if self.current is None:
            return None
        end = self.current + self.slice_size
        while self.cursor + count <= end:
            first = self.cursor
            busy = next((port for port in range(first, first + count) if not bindable(port)), None)
            if busy is None:
                self.cursor = first + count
                return first
            self.cursor = busy + 1
        return None

    def _take_slice(self) -> bool:
        """Lock one more slice that no other process holds (trying from a random one); False if none is left."""
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            os.chmod(self.lock_dir, 0o1777)  # shared by every user's suites, like /tmp
        offset = random.randrange(len(self.slices))
        for index in range(len(self.slices)):
            start = self.slices[(offset + index) % len(self.slices)]
            if start in self.locks:
                continue
            try:  # read-only: another user's suite can still lock a file that root's made (mode 644)
                fd = os.open(self.lock_dir / f"{start}.lock", os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            self.locks[start] = fd
            self.current, self.cursor = start, start
            return True
        return False


_pool: PortPool | None = None
_pool_pid = 0


def _own_pool() -> PortPool:
    """This process's pool (a forked child makes its own: the parent's locks are not its to use)."""
    global _pool, _pool_pid
    if _pool is None or _pool_pid != os.getpid():
        _pool, _pool_pid = PortPool(), os.getpid()
    return _pool


def free_port_block(count: int) -> int:
    """The first of `count` consecutive ports bound on no address, handed to no other process of any
    test suite on this machine (for replicas at port, port+1, …)."""
    return _own_pool().take(count)


def free_port() -> int:
    """A TCP port bound on no address, handed to no other process of any test suite on this machine."""
    return free_port_block(1)
