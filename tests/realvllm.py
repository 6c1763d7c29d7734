"""`VllmServer`: a real vLLM replica (the CPU build in `.venv-vllm`) serving the tiny model, for tests.

    with VllmServer() as vllm:                       # ~45 s to /health 200 on 2 cores
        client = openai.OpenAI(base_url=f"{vllm.base_url}/v1", api_key="x")
        ...

It runs the command of shared/reference/vllm-cpu.md §3 on a free 127.0.0.1 port, with the §11
environment: VLLM_ENFORCE_STRICT_TOOL_CALLING=0 (forced tool calls follow the argument schema and
terminate), VLLM_ALLOW_RUNTIME_LORA_UPDATING=True (the load/unload routes exist), the worker pinned to
one core (VLLM_CPU_OMP_THREADS_BIND) and VLLM_CPU_KVCACHE_SPACE removed (it would override
--kv-cache-memory-bytes). The process is the leader of a session of its own (API server, EngineCore,
Worker and resource_tracker all share its process group); `stop()` signals the whole group, SIGTERM
then SIGKILL, never only the API server (which would orphan EngineCore and Worker with their memory).

`vllm_missing()` says why no real vLLM can run here (no `.venv-vllm/bin/vllm`, no `.tiny-model`),
so tests skip cleanly on a laptop; `make test` builds both (`make setup`, `make tiny-model`).
The `real_vllm` fixture (tests/conftest.py) starts one for the whole session, on the `vllm` group's worker.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from tests.helpers import REPO, HealthPolled, free_port
from tests.simserver import parse_metrics

VLLM_BIN = REPO / ".venv-vllm" / "bin" / "vllm"
TINY_MODEL = REPO / ".tiny-model" / "model"
TINY_ADAPTER = REPO / ".tiny-model" / "ft"
SERVED_NAME = "tiny"
MAX_MODEL_LEN = 2048
READY_TIMEOUT_S = 240.0  # ~45 s alone, 85 s seen under load; generous so a busy CI box does not flake
STOP_TIMEOUT_S = 30.0  # the group is gone in 2-3 s after SIGTERM; an orphaned EngineCore takes 7-15 s

# The recipe's §3 serving flags (besides the model, host, port and served name).
ENGINE_ARGS: tuple[str, ...] = (
    "--max-model-len", str(MAX_MODEL_LEN), "--dtype", "float32", "--enforce-eager",
    "--kv-cache-memory-bytes", "64M",
    "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
    "--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}',
    "--enable-lora", "--max-lora-rank", "16",
    "--enable-prompt-tokens-details", "--enable-force-include-usage", "--disable-uvicorn-access-log",
)


def vllm_missing() -> str | None:
    """Why a real vLLM replica cannot run here (for `pytest.skip`), or None when it can."""
    if not os.access(VLLM_BIN, os.X_OK):
        return f"no real vLLM: {VLLM_BIN.relative_to(REPO)} is missing (make setup builds it)"
    if not (TINY_MODEL / "config.json").is_file():
        return f"no tiny model: {TINY_MODEL.relative_to(REPO)} is missing (make tiny-model builds it)"
    return None


def default_core() -> int:
    """The core the worker's OpenMP threads are pinned to: the last one this process may use."""
    return max(os.sched_getaffinity(0))


def engine_env(core: int, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The recipe's §11 environment for one replica pinned to `core`."""
    env = {**os.environ, "VLLM_ENFORCE_STRICT_TOOL_CALLING": "0", "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True",
           "VLLM_CPU_OMP_THREADS_BIND": str(core), **(extra or {})}
    env.pop("VLLM_CPU_KVCACHE_SPACE", None)
    return env


class VllmServer(HealthPolled):
    """One real vLLM replica of the tiny model on 127.0.0.1:port (`vllm serve`, recipe §3)."""

    label = "vLLM"
    poll_s = 0.5  # /health is refused until the engine is up (about 45 s)
    tail_lines = 60

    def __init__(self, served_name: str = SERVED_NAME, *, port: int | None = None,
                 model_dir: str | Path = TINY_MODEL, args: Sequence[str] = ENGINE_ARGS,
                 core: int | None = None, env: Mapping[str, str] | None = None,
                 ready_timeout: float = READY_TIMEOUT_S, log_dir: str | Path | None = None) -> None:
        self.served_name = served_name
        self.port = port if port is not None else free_port()
        self.model_dir = str(model_dir)
        self.args = list(args)
        self.core = default_core() if core is None else core
        self.env = dict(env or {})
        self.ready_timeout = ready_timeout
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = self.log_file(log_dir, f"vllm-{self.port}.log")
        self._log_file: IO[bytes] | None = None

    @property
    def argv(self) -> list[str]:
        return [str(VLLM_BIN), "serve", self.model_dir, "--host", "127.0.0.1", "--port", str(self.port),
                "--served-model-name", self.served_name, *self.args]

    @property
    def pgid(self) -> int:
        """The process group of the replica (its API server leads a session of its own)."""
        if self.process is None:
            raise RuntimeError("VllmServer is not started")
        return self.process.pid

    def start(self) -> VllmServer:
        """Start `vllm serve` and wait until /health answers 200 (else stop it and raise with the log)."""
        reason = vllm_missing()
        if reason is not None:
            raise RuntimeError(reason)
        log = open(self.log_path, "wb")  # noqa: SIM115 (closed in stop())
        self._log_file = log
        self.process = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                                        env=engine_env(self.core, self.env), stdin=subprocess.DEVNULL,
                                        start_new_session=True)
        try:
            self.wait_ready(self.ready_timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def metrics(self) -> dict[str, float]:
        """/metrics, parsed as tests/simserver.py parses the sim's."""
        with urllib.request.urlopen(f"{self.base_url}/metrics", timeout=30) as resp:
            return parse_metrics(resp.read().decode())

    def post(self, route: str, body: Any) -> tuple[int, str]:
        """POST a JSON body; (status, body text), for any status."""
        request = urllib.request.Request(f"{self.base_url}{route}", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=120) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def group_alive(self) -> bool:
        """Whether any process of the replica's group is still there."""
        try:
            os.killpg(self.pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def stop(self) -> None:
        """SIGTERM the process group, wait for all of it, then SIGKILL the group; safe to call twice."""
        if self.process is not None:
            self._signal_group(signal.SIGTERM)
            deadline = time.monotonic() + STOP_TIMEOUT_S
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=STOP_TIMEOUT_S)
            while self.group_alive() and time.monotonic() < deadline:
                time.sleep(0.2)
            if self.group_alive():
                self._signal_group(signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=10)
        log = self._log_file
        if log is not None:
            log.close()
            self._log_file = None

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pgid, sig)

    def __enter__(self) -> VllmServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
