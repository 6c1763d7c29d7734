"""What the sandbox allows (SandboxPolicy) and what this machine can enforce (Isolation).

Isolation is detected once: bubblewrap (`bwrap`, Debian package `bubblewrap`) when it is installed
and can actually create its namespaces here (a container may forbid that); else the limits alone.
With bubblewrap the program gets no network (`--unshare-net`: only its own loopback), its own PID
namespace (everything it started dies with it), a read-only view of the machine and a private
/tmp. Either way it gets rlimits, a scrubbed environment, its own empty directory and, on x86_64
and aarch64, a seccomp filter that refuses to create processes (threads are allowed): a fork bomb
stops at its first fork, as root too (RLIMIT_NPROC does not bind root).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field

from orchestra_ops.sandbox.seccomp import no_fork_filter

log = logging.getLogger(__name__)

MIB = 1024 * 1024


@dataclass(frozen=True)
class SandboxPolicy:
    """Limits of one program run. Sizes in bytes, times in seconds."""

    wall_time_s: float = 60.0  # then the whole process group (and PID namespace) is killed
    cpu_s: int = 60  # RLIMIT_CPU
    memory_bytes: int = 4096 * MIB  # RLIMIT_AS
    file_bytes: int = 64 * MIB  # RLIMIT_FSIZE: the largest file it may write
    open_files: int = 256  # RLIMIT_NOFILE
    disk_bytes: int = 256 * MIB  # the program's own tmpfs under bubblewrap (its directory and /tmp)
    output_bytes: int = 1 * MIB  # stdout kept; more than this kills the program (output marked truncated)
    stderr_bytes: int = 8192  # the head of stderr kept for the record
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)  # programs running at once
    python: str = sys.executable  # the interpreter the program runs under

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError("workers must be at least 1")
        if self.wall_time_s <= 0 or self.cpu_s < 1:
            raise ValueError("wall_time_s and cpu_s must be positive")


@dataclass(frozen=True)
class Isolation:
    """What this machine enforces beyond rlimits."""

    bwrap: str | None  # the bubblewrap binary, when it works here
    seccomp: bytes | None  # the no-fork filter for this architecture, when there is one
    reason: str = ""  # why bubblewrap is not used

    def describe(self) -> str:
        parts = ["bubblewrap (no network, own PID namespace, read-only root)" if self.bwrap
                 else f"limits alone ({self.reason}; the program can reach the network)"]
        parts.append("no child processes (seccomp)" if self.seccomp
                     else "child processes not limited for root (no seccomp filter for this CPU)")
        return ", ".join(parts)


@functools.lru_cache(maxsize=1)
def detect_isolation() -> Isolation:
    """Probe once per process: is bubblewrap installed and does it work on this machine?"""
    seccomp = no_fork_filter()
    path = shutil.which("bwrap")
    if path is None:
        return Isolation(None, seccomp, "bubblewrap is not installed (apt-get install bubblewrap)")
    argv = [path, *namespace_args(), "--ro-bind", "/", "/", "--", "/bin/true"]
    try:
        probe = subprocess.run(argv, capture_output=True, timeout=30, env={"PATH": "/usr/bin:/bin"}, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Isolation(None, seccomp, f"bubblewrap does not run here: {exc}")
    if probe.returncode != 0:
        detail = probe.stderr.decode(errors="replace").strip() or f"exit {probe.returncode}"
        log.warning("bubblewrap is installed but cannot create namespaces here (%s); the sandbox uses "
                    "the limits alone", detail)
        return Isolation(None, seccomp, f"bubblewrap cannot create namespaces here: {detail}")
    return Isolation(path, seccomp)


def namespace_args() -> list[str]:
    """The namespaces a program gets: no network, its own PID, IPC and UTS namespaces."""
    args = ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
            "--new-session"]
    if os.geteuid() != 0:
        args.insert(0, "--unshare-user")  # an unprivileged bwrap needs a user namespace
    return args
