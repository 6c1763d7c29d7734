"""Helpers every test tier shares: free ports (from tests/ports.py, the one source of them), running `ops`
as a real subprocess, stopping by pid."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil

from orchestra_ops.core import procs
from tests.ports import free_port as free_port  # re-exported: every test and fixture takes ports here
from tests.ports import free_port_block as free_port_block

REPO = Path(__file__).resolve().parent.parent
OPS = [sys.executable, "-m", "orchestra_ops"]


# A process that ignores SIGTERM, with a child in its group that ignores it too; prints the child's pid.
STUBBORN = textwrap.dedent("""
    import signal, subprocess, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen([sys.executable, "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
    print(child.pid, flush=True)
    time.sleep(600)
""")


def wait_port(port: int, host: str = "127.0.0.1", timeout: float = 30.0) -> None:
    """Block until something accepts connections on host:port (or raise TimeoutError)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {host}:{port} after {timeout} s")


def run_ops(args: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | Path | None = None,
            timeout: float = 120, input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run `ops ARGS` as a real subprocess and capture its output."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([*OPS, *args], env=full_env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, input=input, check=False)


def still_ours(record: Mapping[str, Any]) -> bool:
    """Is the pid of a state.json process record still the process that was started (same start time)?"""
    pid, created = record.get("pid"), record.get("create_time")
    return pid is not None and created is not None and procs.is_alive(pid, created)


@contextlib.contextmanager
def frozen(pid: int) -> Iterator[None]:
    """A process we started stopped (SIGSTOP) for the block, then continued: whatever waits on it (a run on a
    frozen sim, a supervisor in its backoff) stays where it is however slowly a loaded machine starts the
    commands the block runs."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


@contextlib.contextmanager
def frozen_once(pid: int, check: Callable[[], object], what: str, timeout_s: float = 120.0) -> Iterator[None]:
    """A process we started frozen (SIGSTOP) for the block, from a moment at which `check()` holds: it is
    frozen before each look and let go again until one holds, so what it shows stays true for the block
    however slowly a loaded machine runs the test (a look-then-freeze could miss a short window)."""
    deadline = time.monotonic() + timeout_s
    while True:
        os.kill(pid, signal.SIGSTOP)
        try:
            if check():
                break
        except BaseException:
            with contextlib.suppress(ProcessLookupError):  # a check that found it gone
                os.kill(pid, signal.SIGCONT)
            raise
        os.kill(pid, signal.SIGCONT)
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s} s"
        time.sleep(0.02)
    try:
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def kill_tree(pid: int, timeout: float = 5.0) -> None:
    """SIGTERM a process we started and all its descendants, then SIGKILL what is left."""
    try:
        parent = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    procs = [*parent.children(recursive=True), parent]
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(signal.SIGTERM)
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(alive, timeout=timeout)


class HealthPolled:
    """`wait_ready` and `log_tail` of a test server process with a /health route (the sim, a real vLLM).

    The class sets `process`, `base_url` and `log_path`; `label`, `poll_s` and `tail_lines` say how it is named,
    polled and shown when it does not come up."""

    process: subprocess.Popen[bytes] | None
    base_url: str
    log_path: Path
    label = "server"
    poll_s = 0.05
    tail_lines = 40

    @staticmethod
    def log_file(log_dir: str | Path | None, name: str) -> Path:
        """`log_dir/name`; without a log_dir, a temp dir kept readable until the test session ends."""
        if log_dir is None:
            log_dir = tempfile.mkdtemp(prefix="ops-test-server-")
            atexit.register(shutil.rmtree, log_dir, ignore_errors=True)
        return Path(log_dir) / name

    def wait_ready(self, timeout: float) -> None:
        """Poll /health (refused while starting) until 200; fail with the log tail if the process exits or
        time runs out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.label} exited with {self.process.returncode} before serving "
                                   f"(log {self.log_path}):\n{self.log_tail()}")
            with contextlib.suppress(OSError, urllib.error.URLError), \
                    urllib.request.urlopen(f"{self.base_url}/health", timeout=2) as resp:
                if resp.status == 200:
                    return
            time.sleep(self.poll_s)
        raise TimeoutError(f"{self.label} not healthy after {timeout:g} s (log {self.log_path}):\n{self.log_tail()}")

    def log_tail(self, lines: int | None = None) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-(lines or self.tail_lines):])


def profile_events(run_dir: Path) -> list[dict[str, Any]]:
    """Every event of a run's profile.jsonl, in file order."""
    return [json.loads(line) for line in (run_dir / "profile.jsonl").read_text().splitlines()]


def model_calls(run_dir: Path) -> list[dict[str, Any]]:
    """The run's model calls (profile.jsonl also holds each replica's counters at the start and end)."""
    return [e for e in profile_events(run_dir) if e.get("type", "model_call") == "model_call"]

