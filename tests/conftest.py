"""Shared pytest fixtures."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import kill_tree
from tests.realvllm import VllmServer, vllm_missing
from tests.simserver import SimServer
from tests.terminal import Terminal
from tests.xdist_groups import pytest_collection_modifyitems  # noqa: F401 (the hook: which tests share a worker)

# xdist's workers start with COLUMNS=80 and LINES=24 in their environment, which `ops` (in process or as a
# child) takes as the width to fit its output to; a test that wants a width sets COLUMNS itself
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)

# A suite started in the background by a non-interactive shell (`bash .ci/run &`) has SIGINT ignored,
# and an ignored signal is inherited by every process a test starts: `ops health --watch` or `ops logs -f`
# would never see the Ctrl-C the test sends. A handler (unlike an ignore) is reset to the default at exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

@pytest.fixture
def sim_server(tmp_path: Path) -> Iterator[Callable[..., SimServer]]:
    """A factory: `sim = sim_server(model="m", args=[...])` starts a SimServer (log in tmp_path),
    stopped at teardown."""
    started: list[SimServer] = []

    def start(model: str = "sim-model", **kwargs: Any) -> SimServer:
        kwargs.setdefault("log_dir", tmp_path)
        server = SimServer(model, **kwargs)
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def real_vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    """One real vLLM replica of the tiny model (tests/realvllm.py) for every module that asks for it (they
    all run on the worker of the `vllm` xdist group), LoRA and runtime updates on; skipped where
    `.venv-vllm` or `.tiny-model` is missing. Tests must leave it as they found it (unload what they
    load). Starting one costs ~45 s of 2 cores."""
    reason = vllm_missing()
    if reason is not None:
        pytest.skip(reason)
    server = VllmServer(log_dir=tmp_path_factory.mktemp("realvllm"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def terminal() -> Iterator[Terminal]:
    """A real pseudo-terminal (tmux on a private socket), closed at teardown."""
    term = Terminal()
    yield term
    term.close()


@pytest.fixture
def spawn() -> Iterator[Callable[[str], subprocess.Popen[str]]]:
    """A factory: `proc = spawn(code)` runs `python -c code` in a session of its own (stdout a text pipe);
    everything it started is killed at teardown."""
    started: list[subprocess.Popen[str]] = []

    def start(code: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                                start_new_session=True)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        kill_tree(proc.pid)
        proc.wait(timeout=10)
