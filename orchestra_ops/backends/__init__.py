"""Backends that start and stop processes: local, tmux, ssh, slurm."""

from __future__ import annotations

from orchestra_ops.backends.base import Backend
from orchestra_ops.errors import ConfigError


def backend_for(name: str, topology: str, *, tmux_socket: str | None = None) -> Backend:
    """The backend called `name` for topology `topology` (imported on demand)."""
    if name == "local":
        from orchestra_ops.backends.local import LocalBackend

        return LocalBackend()
    if name == "tmux":
        from orchestra_ops.backends.tmux import TmuxBackend

        return TmuxBackend(topology, socket_name=tmux_socket)
    raise ConfigError(f"unknown backend '{name}' (this machine runs: local, tmux)")
