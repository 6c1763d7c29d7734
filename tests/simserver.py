"""`SimServer`: run a real `ops serve sim` subprocess on 127.0.0.1 for the length of a `with` block.

    with SimServer(model="m", args=["--latency-ms", "5"]) as sim:
        client = openai.OpenAI(base_url=f"{sim.base_url}/v1", api_key="x")
        ...
        assert sim.metrics()["sim_max_requests_in_flight"] <= 8

The process writes stdout/stderr to `sim.log_path` (in `log_dir`, else a temp dir removed when the
test session ends, so the log stays readable after the block); it is stopped by pid on exit.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

from tests.helpers import REPO, HealthPolled, free_port, kill_tree


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text -> {name{labels}: value, …}; a labelled metric also appears under its bare name
    (the sum over its label sets), so `m["vllm:num_requests_running"]` works. Comments are skipped."""
    out: dict[str, float] = {}
    labelled: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        if not name:
            continue
        try:
            number = float(value)
        except ValueError:
            continue
        name = name.strip()
        out[name] = number
        bare, brace, _ = name.partition("{")
        if brace:
            labelled[bare] = labelled.get(bare, 0.0) + number
    for bare, total in labelled.items():
        out.setdefault(bare, total)
    return out


class SimServer(HealthPolled):
    """A real simulated engine on 127.0.0.1:port, started as `python -m orchestra_ops serve sim …`."""

    label = "sim server"

    def __init__(self, model: str = "sim-model", *, port: int | None = None, args: Sequence[str] = (),
                 env: Mapping[str, str] | None = None, ready_timeout: float = 30,
                 log_dir: str | Path | None = None) -> None:
        self.model = model
        self.port = port if port is not None else free_port()
        self.args = list(args)
        self.env = dict(env) if env is not None else None
        self.ready_timeout = ready_timeout
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = self.log_file(log_dir, f"sim-{self.port}.log")
        self._log_file: IO[bytes] | None = None

    @property
    def argv(self) -> list[str]:
        return [sys.executable, "-m", "orchestra_ops", "serve", "sim", "--host", "127.0.0.1",
                "--port", str(self.port), "--model", self.model, *self.args]

    @property
    def pid(self) -> int:
        if self.process is None:
            raise RuntimeError("SimServer is not started")
        return self.process.pid

    def spawn(self) -> subprocess.Popen[bytes]:
        """Start the process without waiting for it to serve (`start()` also waits)."""
        full_env = {**os.environ, **(self.env or {})}
        log = open(self.log_path, "wb")  # noqa: SIM115 (closed in stop())
        self._log_file = log
        self.process = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, env=full_env,
                                        cwd=REPO, stdin=subprocess.DEVNULL)
        return self.process

    def start(self) -> SimServer:
        """Start the process and wait until /health answers 200."""
        self.spawn()
        try:
            self.wait_ready(self.ready_timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def metrics(self) -> dict[str, float]:
        """The server's /metrics, parsed: {'sim_max_requests_in_flight': 8.0, …}."""
        with urllib.request.urlopen(f"{self.base_url}/metrics", timeout=10) as resp:
            return parse_metrics(resp.read().decode())

    def stop(self) -> None:
        """Stop the process by pid (SIGTERM, then SIGKILL); safe to call twice."""
        if self.process is not None:
            if self.process.poll() is None:
                kill_tree(self.process.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)
        log = self._log_file
        if log is not None:
            log.close()
            self._log_file = None

    def __enter__(self) -> SimServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
