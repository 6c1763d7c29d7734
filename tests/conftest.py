"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.simserver import SimServer
from tests.terminal import Terminal


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


@pytest.fixture
def terminal() -> Iterator[Terminal]:
    """A real pseudo-terminal (tmux on a private socket), closed at teardown."""
    term = Terminal()
    yield term
    term.close()
