"""Sandbox.run(code): one program, its own empty temp dir, a bounded number at once.

Order of work: refuse (SandboxUnavailable) when bubblewrap cannot isolate here and the policy is not
`unsafe`; wait for a worker slot (`policy.workers`); start `python -I` through the launcher
(sandbox/launcher.py) with an environment built from scratch (PATH, HOME, TMPDIR, LANG: no provider
key, no variable of ours), in a new session (its own process group). Under bubblewrap (the
namespaces of policy.py, the read-only layout of layout.py) the program's directory is `/tmp/work`
in a tmpfs of its own (`disk_bytes`), the code goes in through stdin and nothing touches this
machine's disk; without it, a fresh temp directory holds `main.py`. Read stdout
up to `output_bytes` (more kills it: output marked truncated) and the head of stderr; after
`wall_time_s` kill the whole process group (with bubblewrap the PID namespace dies with it);
always remove the directory. A cancelled caller (a task deadline) kills the program too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from orchestra_ops.sandbox.launcher import LAUNCHER
from orchestra_ops.sandbox.layout import interpreter_binds, system_binds
from orchestra_ops.sandbox.policy import Isolation, SandboxPolicy, detect_isolation, require_isolation

try:
    import psutil
except ImportError:  # a bare system Python (the ordinary-user tests): under bubblewrap the PID namespace
    psutil = None  # type: ignore[assignment]  # takes every descendant down with the program anyway

log = logging.getLogger(__name__)

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
INSIDE_DIR = "/tmp/work"  # where the program's directory appears under bubblewrap
READ_CHUNK = 65536


@dataclass(frozen=True)
class ExecResult:
    """How one program ended. `stdout` is what it printed (the first `output_bytes`)."""

    stdout: str
    stderr: str  # the head of stderr
    returncode: int | None  # None: killed by us (wall time or output limit)
    timed_out: bool
    truncated: bool  # printed more than the output limit and was stopped
    duration_s: float

    @property
    def status(self) -> str:
        if self.timed_out:
            return "timeout"
        if self.truncated:
            return "output_limit"
        return "ok" if self.returncode == 0 else f"exit_{self.returncode}"

    def to_json(self) -> dict[str, object]:
        return {"status": self.status, "returncode": self.returncode, "timed_out": self.timed_out,
                "truncated": self.truncated, "duration_s": round(self.duration_s, 4)}


class Sandbox:
    """Runs untrusted Python; at most `policy.workers` programs at once (create one per run)."""

    def __init__(self, policy: SandboxPolicy | None = None, isolation: Isolation | None = None,
                 base_dir: str | None = None) -> None:
        self.policy = policy or SandboxPolicy()
        self.isolation = isolation or detect_isolation()
        self.base_dir = base_dir
        self._slots = asyncio.Semaphore(self.policy.workers)
        self.running = 0
        self.most_running = 0

    def describe(self, policy: SandboxPolicy | None = None) -> str:
        p = policy or self.policy
        disk = f", {p.disk_bytes // (1024 * 1024)} MiB disk" if self.isolation.bwrap else ""
        return (f"{self.isolation.describe()}; {self.policy.workers} at once, {p.wall_time_s:g} s wall time, "
                f"{p.cpu_s} s CPU, {p.memory_bytes // (1024 * 1024)} MiB memory{disk}, "
                f"{p.output_bytes // 1024} KiB output")

    @staticmethod
    def _limits(p: SandboxPolicy) -> dict[str, tuple[int, int]]:
        return {"RLIMIT_CPU": (p.cpu_s, p.cpu_s + 1), "RLIMIT_AS": (p.memory_bytes, p.memory_bytes),
                "RLIMIT_FSIZE": (p.file_bytes, p.file_bytes), "RLIMIT_NOFILE": (p.open_files, p.open_files),
                "RLIMIT_CORE": (0, 0)}

    def _command(self, workdir: Path | None, policy: SandboxPolicy) -> tuple[list[str], dict[str, str], str]:
        """argv, environment and working directory of one run (`workdir` None: under bubblewrap)."""
        inside = INSIDE_DIR if workdir is None else str(workdir)
        env = {"PATH": SAFE_PATH, "HOME": inside, "TMPDIR": inside, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
               "PYTHONIOENCODING": "utf-8", "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg"}
        limits = ",".join(f"{name}={soft}:{hard}" for name, (soft, hard) in self._limits(policy).items())
        in_launcher = b"" if workdir is None else (self.isolation.seccomp or b"")
        program = [policy.python, "-I", "-c", LAUNCHER, limits, in_launcher.hex(), "stdin" if workdir is None else ""]
        if workdir is not None:
            return program, env, str(workdir)
        assert self.isolation.bwrap is not None
        # the program's directory lives in its own size-bounded tmpfs: nothing of it is on this machine's disk
        # only the system's libraries and the interpreter, read-only (sandbox/layout.py); the private /tmp
        # comes before the interpreter's binds so that an interpreter under /tmp is bound back over it
        argv = [self.isolation.bwrap, *self.isolation.flags, *system_binds(), "--dev", "/dev", "--proc", "/proc",
                "--size", str(policy.disk_bytes), "--tmpfs", "/tmp", *interpreter_binds(policy.python),
                "--dir", INSIDE_DIR, "--chdir", INSIDE_DIR, "--clearenv"]
        for key, value in env.items():
            argv += ["--setenv", key, value]
        return [*argv, "--", *program], env, "/"

    async def run(self, code: str, policy: SandboxPolicy | None = None) -> ExecResult:
        """Run `code` under `policy`'s limits (default: the sandbox's; `workers` is always the sandbox's).

        Without bubblewrap's isolation the program runs only when `policy.unsafe` (else SandboxUnavailable).
        """
        require_isolation(policy or self.policy, self.isolation)
        async with self._slots:
            self.running += 1
            self.most_running = max(self.most_running, self.running)
            try:
                return await self._run(code, policy or self.policy)
            finally:
                self.running -= 1

    async def _run(self, code: str, policy: SandboxPolicy) -> ExecResult:
        workdir = None if self.isolation.bwrap else Path(tempfile.mkdtemp(prefix="ops-exec-", dir=self.base_dir))
        try:
            if workdir is not None:
                (workdir / "main.py").write_text(code, encoding="utf-8")
            argv, env, cwd = self._command(workdir, policy)
            start = time.monotonic()
            filter_fd = self._filter_fd(argv)
            try:
                proc = await asyncio.create_subprocess_exec(
                    *argv, stdin=asyncio.subprocess.DEVNULL if workdir else asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env, cwd=cwd,
                    start_new_session=True, pass_fds=() if filter_fd is None else (filter_fd,))
            finally:
                if filter_fd is not None:
                    os.close(filter_fd)
            try:
                if proc.stdin is not None:  # the code goes in through stdin: the launcher writes main.py inside
                    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                        proc.stdin.write(code.encode("utf-8"))
                        await proc.stdin.drain()
                    proc.stdin.close()
                return await self._collect(proc, start, policy)
            finally:
                _kill_group(proc)
                with contextlib.suppress(ProcessLookupError):
                    await proc.wait()
        finally:
            if workdir is not None:
                _remove_tree(workdir)

    def _filter_fd(self, argv: list[str]) -> int | None:
        """Under bubblewrap, `--seccomp FD` reads the filter from a pipe (inserted before `--`)."""
        if not (self.isolation.bwrap and self.isolation.seccomp):
            return None
        read, write = os.pipe()
        try:
            os.write(write, self.isolation.seccomp)
        finally:
            os.close(write)
        argv.insert(argv.index("--"), str(read))
        argv.insert(argv.index("--") - 1, "--seccomp")
        return read

    async def _collect(self, proc: asyncio.subprocess.Process, start: float, policy: SandboxPolicy) -> ExecResult:
        assert proc.stdout is not None and proc.stderr is not None
        out = bytearray()
        err = bytearray()
        truncated = False

        async def read_stdout() -> None:
            nonlocal truncated
            assert proc.stdout is not None
            # read to EOF even past the cap: a pipe left unread pauses its transport, and asyncio's
            # wait() then never returns (it waits for every pipe to close), so the run would end at
            # its wall time instead of at once
            while chunk := await proc.stdout.read(READ_CHUNK):
                if truncated:
                    continue
                out.extend(chunk)
                if len(out) > policy.output_bytes:
                    del out[policy.output_bytes:]
                    truncated = True
                    _kill_group(proc)

        async def read_stderr() -> None:
            assert proc.stderr is not None
            while chunk := await proc.stderr.read(READ_CHUNK):
                if len(err) < policy.stderr_bytes:
                    err.extend(chunk[: policy.stderr_bytes - len(err)])

        timed_out = False
        gathered = asyncio.gather(read_stdout(), read_stderr(), proc.wait())
        # cancelled with its task (a second Ctrl-C), wait_for leaves the gather's CancelledError unread:
        # read it here, or asyncio logs "_GatheringFuture exception was never retrieved" for each program
        gathered.add_done_callback(lambda done: done.cancelled() or done.exception())
        try:
            await asyncio.wait_for(gathered, policy.wall_time_s)
        except asyncio.TimeoutError:
            timed_out = True
            _kill_group(proc)
        returncode = None if (timed_out or truncated) else proc.returncode
        return ExecResult(stdout=out.decode("utf-8", errors="replace"), stderr=err.decode("utf-8", errors="replace"),
                          returncode=returncode, timed_out=timed_out, truncated=truncated,
                          duration_s=time.monotonic() - start)


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the program's process group and any descendant that left it (setsid)."""
    if proc.returncode is not None:
        return
    if psutil is not None:
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(proc.pid).children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    child.kill()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _remove_tree(path: Path) -> None:
    """Remove the program's directory, also where it took its own permissions away."""
    shutil.rmtree(path, ignore_errors=True)
    if not path.exists():
        return
    for root, dirs, _files in os.walk(path, topdown=True):
        for name in dirs:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(root, name), stat.S_IRWXU)
    shutil.rmtree(path, ignore_errors=True)
    if path.exists():
        log.warning("could not remove the sandbox directory %s", path)
