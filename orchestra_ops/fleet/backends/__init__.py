"""Backends that start and stop processes, one node at a time: local, tmux, ssh, slurm.

A node's backend is decided by the topology (config.nodes.Node.backend) and recorded in state.json with
each node and process, so every later command finds the backend that owns them. Adding a backend is
one module with a class that implements `base.Backend` and one line in BACKENDS.
"""

from __future__ import annotations

import importlib
from types import TracebackType

from orchestra_ops.errors import StateError
from orchestra_ops.fleet.backends.base import Backend

# name -> "module:class" under orchestra_ops.fleet.backends, imported on first use
BACKENDS: dict[str, str] = {
    "local": "local:LocalBackend",
    "tmux": "tmux:TmuxBackend",
    "ssh": "ssh:SshBackend",
    "slurm": "slurm:SlurmBackend",
}


class Backends:
    """The backend instances one command uses (one each, created on demand); `close()` ends connections."""

    def __init__(self) -> None:
        self._instances: dict[str, Backend] = {}

    def get(self, name: str) -> Backend:
        if name not in self._instances:
            if name not in BACKENDS:
                raise StateError(f"unknown backend '{name}' (known: {', '.join(BACKENDS)})")
            module_name, cls = BACKENDS[name].split(":")
            module = importlib.import_module(f"orchestra_ops.fleet.backends.{module_name}")
            self._instances[name] = getattr(module, cls)()
        return self._instances[name]

    def close(self) -> None:
        for backend in self._instances.values():
            backend.close()

    def __enter__(self) -> Backends:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
