"""What the sandbox allows (SandboxPolicy) and what this machine can enforce (Isolation).

Isolation is detected once per process by running bubblewrap (`bwrap`, Debian package
`bubblewrap`) with the exact namespace flags and filesystem layout programs get and checking, from
inside, uid 65534 and an empty CapEff. When that works, every program gets (namespace_args, as root
too): a user namespace in which it is uid/gid 65534 with every capability dropped (and, with
bubblewrap >= 0.8, no nested user namespace), its own PID namespace with a fresh /proc (everything
it started dies with it), its own network namespace (only its own loopback: no socket to this
machine, no namespace of ours to setns into), IPC, UTS and cgroup namespaces and a new session; it
sees only what its interpreter needs, read-only (sandbox/layout.py), and a private /tmp.

When it does not work (not installed, user namespaces forbidden here), nothing runs unless the
policy says `unsafe` (`ops eval --exec-unsafe`); then the limits alone apply. Either way a program
gets rlimits, a scrubbed environment, its own empty directory and, on x86_64 and aarch64, a seccomp
filter that refuses to create processes (threads are allowed): a fork bomb stops at its first fork,
as root too (RLIMIT_NPROC does not bind root).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field

from orchestra_ops.errors import ConfigError
from orchestra_ops.sandbox.layout import interpreter_roots, system_binds
from orchestra_ops.sandbox.seccomp import no_fork_filter

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
    unsafe: bool = False  # run without bubblewrap where it cannot isolate here (--exec-unsafe); else refuse

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError("workers must be at least 1")
        if self.wall_time_s <= 0 or self.cpu_s < 1:
            raise ValueError("wall_time_s and cpu_s must be positive")


SANDBOX_UID = 65534  # "nobody": the uid and gid a program has inside its user namespace
UNSAFE_FLAG = "--exec-unsafe"


@dataclass(frozen=True)
class Isolation:
    """What this machine enforces beyond rlimits. `bwrap` is set only when every namespace works here."""

    bwrap: str | None  # the bubblewrap binary, when it gives the whole isolation here
    seccomp: bytes | None  # the no-fork filter for this architecture, when there is one
    reason: str = ""  # why bubblewrap is not used
    flags: tuple[str, ...] = ()  # the namespace flags the probe ran with (namespace_args)

    @property
    def full(self) -> bool:
        return self.bwrap is not None

    def describe(self) -> str:
        if self.bwrap:
            nested = "" if "--disable-userns" in self.flags else " (this bubblewrap cannot forbid nested ones)"
            parts = [f"bubblewrap: own user namespace{nested}, uid {SANDBOX_UID}, no capabilities, own PID "
                     "namespace and /proc, no network, own IPC, UTS (and cgroup, where the kernel has them) "
                     "namespaces, only the interpreter and system libraries visible (read-only), a private /tmp"]
        else:
            parts = [f"NOT ISOLATED ({UNSAFE_FLAG}): limits alone ({self.reason}; the program runs as this user, "
                     "sees this machine's files and can reach the network)"]
        parts.append("no child processes (seccomp)" if self.seccomp
                     else "child processes not limited for root (no seccomp filter for this CPU)")
        return ", ".join(parts)


class SandboxUnavailable(ConfigError):
    """bubblewrap cannot isolate programs here and the user did not accept running them without it.

    Exit 2, like any refusal decided before anything starts: the fix is the user's (install or
    enable bubblewrap, or pass --exec-unsafe knowingly), not a retry.
    """

    def __init__(self, isolation: Isolation) -> None:
        super().__init__(f"model-written code cannot be sandboxed here: {isolation.reason}. Refusing to run it "
                         f"without isolation; fix bubblewrap, or pass {UNSAFE_FLAG} to run it with the limits "
                         "alone (as this user, seeing this machine's files and network)")
        self.isolation = isolation


def require_isolation(policy: SandboxPolicy, isolation: Isolation | None = None) -> Isolation:
    """The isolation programs under `policy` get here; SandboxUnavailable when it is not bubblewrap's and
    `policy.unsafe` is not set, a ConfigError when the interpreter cannot be bound without exposing too much.
    Suites call it at start (the run fails in a second, not per task); Sandbox.run calls it for every program."""
    found = isolation or detect_isolation()
    if not (found.full or policy.unsafe):
        raise SandboxUnavailable(found)
    if found.full:
        interpreter_roots(policy.python)
    return found


@functools.lru_cache(maxsize=1)
def detect_isolation() -> Isolation:
    """Probe once per process: does bubblewrap give the whole isolation here, with the exact flags used?

    The probe runs `cat /proc/self/status` inside and checks what the flags promise: the
    unprivileged uid and no effective capability (a bubblewrap that silently gives less is not used).
    """
    seccomp = no_fork_filter()
    path = shutil.which("bwrap")
    if path is None:
        return Isolation(None, seccomp, "bubblewrap is not installed (apt-get install bubblewrap)")
    env = {"PATH": "/usr/bin:/bin"}
    try:
        usage = subprocess.run([path, "--help"], capture_output=True, timeout=30, env=env, check=False)
        flags = tuple(namespace_args(usage.stdout.decode(errors="replace")))
        argv = [path, *flags, *system_binds(), "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
                "--clearenv", "--", "cat", "/proc/self/status"]
        probe = subprocess.run(argv, capture_output=True, timeout=30, env=env, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Isolation(None, seccomp, f"bubblewrap does not run here: {exc}")
    if probe.returncode != 0:
        detail = probe.stderr.decode(errors="replace").strip() or f"exit {probe.returncode}"
        return Isolation(None, seccomp, f"bubblewrap cannot create its namespaces here: {detail}")
    status = dict(line.split(":", 1) for line in probe.stdout.decode(errors="replace").splitlines() if ":" in line)
    uid = status.get("Uid", "").split()
    if uid[:1] != [str(SANDBOX_UID)] or int(status.get("CapEff", "1").strip() or "1", 16) != 0:
        return Isolation(None, seccomp, f"bubblewrap ran but gave uid {uid[:1]} and CapEff "
                                        f"{status.get('CapEff', '?').strip()} instead of uid {SANDBOX_UID} and none")
    return Isolation(path, seccomp, flags=flags)


def namespace_args(usage: str = "") -> list[str]:
    """Every namespace, as root too: a user namespace in which the program is uid/gid 65534 with no
    capability (and, where this bubblewrap can, may not create another), its own PID namespace (a
    fresh /proc; everything it started dies with it), network (only its own loopback: nothing to
    connect or setns to), IPC, UTS and cgroup namespaces, a new session (no terminal to inject into).

    `usage`: `bwrap --help`, to add the flags only newer versions have."""
    args = ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--cap-drop", "ALL",
            "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session"]
    if "--disable-userns" in usage:
        args.insert(1, "--disable-userns")
    return args
