"""`.ops/<name>/state.json`: what `ops up` started, written atomically, read by every other command.

    {"name": "local", "topology_file": "/abs/topologies/local.yaml", "backend": "local",
     "status": "up", "started_at": 1715000000.0, "ready_at": null, "stopped_at": null,
     "cwd": "/abs", "tmux_socket": null, "tmux_session": null, "provider_key_envs": [],
     "processes": [{"name": "orchestrator/0", "pid": 1234, "pgid": 1234, "create_time": 1715….,
                    "host": "127.0.0.1", "port": 18100, "log": "/abs/.ops/local/logs/….log", …}]}

`status` is "up" from the moment processes were launched (before readiness, so `ops down` works
after a crash mid-`up`) until `ops down`, then "down". Nothing secret is ever stored here.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from orchestra_ops.errors import StateError
from orchestra_ops.fsutil import atomic_write_text, read_json
from orchestra_ops.paths import latest_topology_name, ops_home, state_path

Status = Literal["up", "down"]
STATE_VERSION = 1


@dataclass(frozen=True)
class ProcessRecord:
    """One launched process: identity (pid + start time), group, where it serves, where it logs."""

    name: str
    group: str
    kind: str  # vllm | sim | retrieval
    pid: int
    pgid: int
    sid: int | None
    create_time: float
    host: str
    port: int
    log: str
    argv: list[str]
    env: dict[str, str]  # only what the plan sets (never the inherited environment)
    served_model_name: str | None
    endpoint_key: str
    log_offset: int = 0  # size of the log before this launch: this run's lines start here
    tmux_window: str | None = None

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def reproduce(self) -> str:
        import shlex

        assignments = [f"{key}={shlex.quote(value)}" for key, value in self.env.items()]
        return " ".join(["env", *assignments, shlex.join(self.argv)])


@dataclass(frozen=True)
class FleetState:
    name: str
    topology_file: str
    backend: str
    status: Status
    started_at: float
    cwd: str
    processes: list[ProcessRecord] = field(default_factory=list)
    ready_at: float | None = None
    stopped_at: float | None = None
    tmux_socket: str | None = None
    tmux_session: str | None = None
    provider_key_envs: list[str] = field(default_factory=list)
    endpoints_file: str | None = None
    version: int = STATE_VERSION

    def by_name(self, name: str) -> ProcessRecord:
        for record in self.processes:
            if record.name == name:
                return record
        known = ", ".join(r.name for r in self.processes) or "none"
        raise StateError(f"topology '{self.name}' has no process '{name}' (processes: {known})")

    def with_status(self, status: Status, **changes: Any) -> FleetState:
        return replace(self, status=status, **changes)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FleetState:
        known = {f.name for f in fields(cls)}
        record_fields = {f.name for f in fields(ProcessRecord)}
        body = {key: value for key, value in data.items() if key in known}
        body["processes"] = [
            ProcessRecord(**{k: v for k, v in proc.items() if k in record_fields})
            for proc in data.get("processes", [])
        ]
        return cls(**body)


def write_state(state: FleetState, path: str | Path | None = None) -> Path:
    """Write `state` atomically to `path` (default `.ops/<name>/state.json`)."""
    target = Path(path) if path is not None else state_path(state.name)
    return atomic_write_text(target, json.dumps(state.to_json(), indent=2) + "\n")


def read_state(name: str | None = None, *, path: str | Path | None = None) -> FleetState:
    """Read the state of topology `name` (or the file `path`); every problem names the file."""
    source = Path(path) if path is not None else state_path(_require(name))
    raw = read_json(source, error=StateError, missing="no state; `ops up` this topology first")
    if not isinstance(raw, dict):
        raise StateError(f"{source}: not a state file (expected a JSON object)")
    try:
        return FleetState.from_json(raw)
    except (TypeError, ValueError) as exc:
        raise StateError(f"{source}: not a state file this version understands: {exc}") from None


def _require(name: str | None) -> str:
    if not name:
        raise StateError("no topology given")
    return name


def resolve_name(name: str | None, *, up_only: bool = True) -> str:
    """`name`, or the most recent topology that is up (or, with up_only=False, any recent one)."""
    if name:
        return name
    latest = latest_topology_name(up_only=True)
    if latest is None and not up_only:
        latest = latest_topology_name(up_only=False)
    if latest is None:
        where = ops_home()
        raise StateError(f"no topology is up (state under {where}); give one, or `ops up TOPOLOGY` first")
    return latest
