"""`.ops/<name>/state.json`: what `ops up` started, written atomically, read by every other command.

    {"version": 2, "name": "mixed", "topology_file": "/abs/mixed.yaml", "backend": "local",
     "status": "up", "started_at": 1715000000.0, "ready_at": null, "stopped_at": null, "cwd": "/abs",
     "provider_key_envs": [], "endpoints_file": null, "engine_versions": {"gpu8": "0.32.0"},
     "nodes": [{"name": "cpu", "backend": "local", "host": "127.0.0.1", "handle": {}},
               {"name": "far", "backend": "ssh", "host": "gpu-box",
                "handle": {"host": "gpu-box", "port": 22, "user": "me", "session": "ops-mixed-far", …}},
               {"name": "gpu8", "backend": "slurm", "host": "node017",
                "handle": {"job_id": "4242", "job_log": "/abs/logs/gpu8.slurm.log", …}}],
     "processes": [{"name": "answer/0", "node": "gpu8", "backend": "slurm", "host": "node017",
                    "port": 1820, "pid": null, "log": "/abs/logs/answer-0.log", "handle": {}, …}]}

Each node and each process carries its backend and a `handle`: what that backend needs to find the
node and its processes again (a tmux socket and session, ssh settings, a slurm job id, a remote
pid's start ticks). Only the backend that wrote a handle reads it, so `down`, `status`, `logs` and
`health` dispatch per node and a new backend adds a module, not branches.

`status` is "up" from the moment processes were launched (before readiness, so `ops down` works
after a crash mid-`up`) until `ops down`, then "down". Nothing secret is ever stored here.
Version 1 files (one backend for the whole fleet, tmux fields at the top) are read as one node.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from orchestra_ops.core import procs
from orchestra_ops.core.fsutil import atomic_write_text, read_json
from orchestra_ops.core.paths import latest_topology_name, ops_home, state_path
from orchestra_ops.errors import StateError

Status = Literal["up", "down"]
STATE_VERSION = 2
V1_NODE = "this-machine"  # the one node a version-1 state is read as


def server_url(host: str, port: int) -> str:
    """`http://HOST:PORT` of a fleet process (an IPv6 address in brackets)."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


@dataclass(frozen=True, kw_only=True)
class NodeRecord:
    """One node of a fleet: the backend that owns its processes, and how that backend reaches it."""

    name: str
    backend: str  # local | tmux | ssh | slurm
    host: str | None  # where its servers answer; None while a slurm job waits for its node
    handle: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class ProcessRecord:
    """One launched process: where it runs and serves, who owns it, where it logs."""

    name: str
    group: str
    kind: str  # vllm | sim | retrieval
    node: str = V1_NODE
    backend: str = "local"
    host: str | None  # None until its slurm job has a node
    port: int
    log: str
    argv: list[str]
    env: dict[str, str]  # only what the plan sets (never the inherited environment)
    served_model_name: str | None
    endpoint_key: str
    adapters: list[str] = field(default_factory=list)  # declared LoRA adapters it serves (more endpoints keys)
    pid: int | None = None  # on its node; None for a process its slurm job owns
    pgid: int | None = None
    sid: int | None = None
    create_time: float | None = None  # start time on this machine (local, tmux): pid + time = identity
    log_offset: int = 0  # size of the log before this launch: this run's lines start here
    handle: dict[str, Any] = field(default_factory=dict)  # the backend's own (tmux window, remote start ticks)
    role: str = "server"  # server | ray-head | ray-worker (config/layout.py); Ray nodes are no endpoint
    ranks: list[int] = field(default_factory=list)  # the DP ranks a vLLM server runs (vLLM's own DP)
    stages: list[int] = field(default_factory=list)  # pipeline stages on its host (PP > 1)
    domain: str | None = None  # failure domain (its model) when its model's processes step together
    host_index: int = 0  # which host of its slurm job's allocation (the node's handle lists them), 0: the first
    more_ports: list[int] = field(default_factory=list)  # its other ports (a Ray node's): `ops down` checks them too

    @property
    def all_ports(self) -> list[int]:
        return [self.port, *self.more_ports]

    @property
    def serves(self) -> bool:
        return self.role == "server"

    @property
    def base_url(self) -> str | None:
        return None if self.host is None else server_url(self.host, self.port)

    @property
    def reproduce(self) -> str:
        assignments = [f"{key}={shlex.quote(value)}" for key, value in self.env.items()]
        return " ".join(["env", *assignments, shlex.join(self.argv)])


@dataclass(frozen=True, kw_only=True)
class FleetState:
    name: str
    topology_file: str
    status: Status
    started_at: float
    cwd: str
    backend: str = "local"  # the topology's `backend` (nodes on this machine); each node records its own
    nodes: list[NodeRecord] = field(default_factory=list)
    processes: list[ProcessRecord] = field(default_factory=list)
    ready_at: float | None = None
    stopped_at: float | None = None
    provider_key_envs: list[str] = field(default_factory=list)
    endpoints_file: str | None = None
    engine_versions: dict[str, str] = field(default_factory=dict)  # node -> the vLLM version that checked it
    version: int = STATE_VERSION

    def by_name(self, name: str) -> ProcessRecord:
        for record in self.processes:
            if record.name == name:
                return record
        known = ", ".join(r.name for r in self.processes) or "none"
        raise StateError(f"topology '{self.name}' has no process '{name}' (processes: {known})")

    def node(self, name: str) -> NodeRecord:
        for node in self.nodes:
            if node.name == name:
                return node
        raise StateError(f"topology '{self.name}' has no node '{name}' in its state")

    def processes_of(self, node: str) -> list[ProcessRecord]:
        return [record for record in self.processes if record.node == node]

    @property
    def backends(self) -> list[str]:
        """The backends of this fleet's nodes, in node order, each once."""
        return list(dict.fromkeys(node.backend for node in self.nodes))

    def with_status(self, status: Status, **changes: Any) -> FleetState:
        return replace(self, status=status, **changes)

    def with_node(self, node: NodeRecord) -> FleetState:
        """Replace a node record (e.g. once slurm says where a job runs); its processes take its host (on a job
        of several nodes, the host its `host_index` names in the handle's `hosts`)."""
        nodes = [node if n.name == node.name else n for n in self.nodes]
        hosts = node.handle.get("hosts") or []

        def host_of(record: ProcessRecord) -> str | None:
            return hosts[record.host_index] if 0 < record.host_index < len(hosts) else node.host

        processes = [replace(p, host=host_of(p)) if p.node == node.name and p.host != host_of(p) and host_of(p)
                     else p for p in self.processes]
        return replace(self, nodes=nodes, processes=processes)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FleetState:
        version = data.get("version", 1)
        if not isinstance(version, int) or version > STATE_VERSION:
            raise ValueError(f"it was written by a newer orchestra-ops (state version {version}; this one reads "
                             f"up to {STATE_VERSION}): run `ops down` with that version")
        if version == 1:
            data = _upgrade_v1(data)
        known = {f.name for f in fields(cls)}
        body = {key: value for key, value in data.items() if key in known}
        body["nodes"] = [NodeRecord(**_known(NodeRecord, node)) for node in data.get("nodes", [])]
        body["processes"] = [ProcessRecord(**_known(ProcessRecord, proc)) for proc in data.get("processes", [])]
        body["version"] = STATE_VERSION
        return cls(**body)


def _known(kind: type, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(kind)}
    return {key: value for key, value in data.items() if key in names}


def _upgrade_v1(data: dict[str, Any]) -> dict[str, Any]:
    """A version-1 state (one backend, local or tmux, for the whole fleet) as one node of that backend."""
    backend = data.get("backend", "local")
    if backend not in ("local", "tmux"):
        raise ValueError(f"a version-1 state with backend '{backend}' cannot exist (version 1 ran local and tmux only)")
    handle = {"socket": data.get("tmux_socket"), "session": data.get("tmux_session")} if backend == "tmux" else {}
    processes = []
    for proc in data.get("processes", []):
        upgraded = {**proc, "node": V1_NODE, "backend": backend}
        window = upgraded.pop("tmux_window", None)
        upgraded["handle"] = {"window": window} if window else {}
        processes.append(upgraded)
    host = processes[0].get("host") if processes else "127.0.0.1"
    node = {"name": V1_NODE, "backend": backend, "host": host, "handle": handle}
    return {**data, "nodes": [node], "processes": processes}


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
    except (TypeError, ValueError, AttributeError) as exc:
        raise StateError(f"{source}: not a state file this version understands: {exc}") from None


def started_by_ops(pid: int) -> tuple[str, ProcessRecord] | None:
    """(topology, record) when `pid`, or a process it descends from, is one `ops up` started and still
    runs (a fleet that is up in this OPS_HOME; pid and start time both match), else None."""
    lineage = procs.lineage(pid)
    if not lineage:
        return None
    home = ops_home()
    for path in sorted(home.glob("*/state.json")) if home.is_dir() else []:
        try:
            state = read_state(path=path)
        except StateError:
            continue
        if state.status != "up":
            continue
        for record in state.processes:
            for proc in lineage:
                if record.pid == proc.pid and procs.is_alive(proc.pid, record.create_time):
                    return state.name, record
    return None


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
