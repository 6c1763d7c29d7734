"""`GatewayServer`: a real `ops serve gateway` subprocess on 127.0.0.1 for the length of a `with` block.

    with GatewayServer(["--model-config", str(config)], cwd=tmp_path) as gw:
        client = openai.OpenAI(base_url=f"{gw.base_url}/v1", api_key="x")

It runs in `cwd` (its request log goes to `cwd/runs/gateway-<name>/` unless --run-dir says otherwise),
logs to `cwd/gateway-<port>.log`, and is stopped by pid (SIGTERM: a clean stop flushes the log).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

from tests.helpers import OPS, HealthPolled, free_port, kill_tree
from tests.simserver import parse_metrics


class GatewayServer(HealthPolled):
    label = "gateway"

    def __init__(self, args: Sequence[str], *, cwd: str | Path, port: int | None = None,
                 env: Mapping[str, str] | None = None, ready_timeout: float = 60) -> None:
        self.args = list(args)
        self.cwd = Path(cwd)
        self.port = port if port is not None else free_port()
        self.env = dict(env or {})
        self.ready_timeout = ready_timeout
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = self.cwd / f"gateway-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def argv(self) -> list[str]:
        return [*OPS, "serve", "gateway", "--port", str(self.port), *self.args]

    def start(self) -> GatewayServer:
        self._log = open(self.log_path, "wb")  # noqa: SIM115 (closed in stop())
        self.process = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT, cwd=self.cwd,
                                        env={**os.environ, **self.env}, stdin=subprocess.DEVNULL)
        try:
            self.wait_ready(self.ready_timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def metrics(self) -> dict[str, float]:
        with urllib.request.urlopen(f"{self.base_url}/metrics", timeout=10) as resp:
            return parse_metrics(resp.read().decode())

    def stop(self) -> int | None:
        """SIGTERM (then SIGKILL) by pid; the exit status (None when it had to be killed)."""
        code = None
        if self.process is not None:
            if self.process.poll() is None:
                self.process.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=10)
                if self.process.poll() is None:
                    kill_tree(self.process.pid)
            code = self.process.poll()
        if self._log is not None:
            self._log.close()
            self._log = None
        return code

    def __enter__(self) -> GatewayServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
