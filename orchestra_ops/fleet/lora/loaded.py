"""`.ops/<name>/lora.json`: the adapters `ops lora load` put into the running replicas of a topology.

    {"version": 1, "adapters": {"ft": {"model": "answer", "path": "/abs/output", "loaded_at": 1715000000.0,
      "replicas": [{"name": "answer/0", "pid": 1234, "create_time": 1715000000.0}, …], "partial": false}}}

vLLM keeps runtime adapters in the API server's memory only: a replica that restarts has lost
them. So an entry holds only while every replica it names still runs as the same process (pid and
start time in state.json); `read_records` leaves the others out. The file is written atomically,
and `locked` serializes `ops lora` commands on one topology (load, verify, write). state.json is
never touched; `partial` marks an adapter some replicas could not give back (unload finishes it).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from orchestra_ops.core.fsutil import atomic_write_text
from orchestra_ops.core.paths import topology_dir
from orchestra_ops.errors import LaunchError, StateError
from orchestra_ops.fleet.state import FleetState, ProcessRecord

T = TypeVar("T")

RECORDS_FILE = "lora.json"
LOCK_FILE = "lora.lock"
RECORDS_VERSION = 1


@dataclass(frozen=True)
class ReplicaRef:
    """A replica as it ran when the adapter went in (a restart makes a new process).

    Its identity is what its backend records: pid and start time on this machine, the start ticks of
    a process on an ssh node, the job id of a slurm node (a new `ops up` submits a new job).
    """

    name: str
    pid: int | None
    create_time: float | None
    instance: str | None = None

    @classmethod
    def of(cls, state: FleetState, record: ProcessRecord) -> ReplicaRef:
        node = next((n for n in state.nodes if n.name == record.node), None)
        job = node.handle.get("job_id") if node is not None else None
        ticks = record.handle.get("start_ticks")
        instance = f"job:{job}" if job is not None else (f"ticks:{ticks}" if ticks is not None else None)
        return cls(record.name, record.pid, record.create_time, instance)


@dataclass(frozen=True)
class LoadedAdapter:
    name: str
    model: str  # the topology's model key
    path: str
    loaded_at: float
    replicas: list[ReplicaRef] = field(default_factory=list)
    partial: bool = False

    def to_json(self) -> dict[str, Any]:
        body = asdict(self)
        body.pop("name")
        return body


def records_path(topology_name: str) -> Path:
    return topology_dir(topology_name) / RECORDS_FILE


@contextlib.contextmanager
def locked(topology_name: str, timeout_s: float | None = None) -> Iterator[None]:
    """One `ops lora` command at a time on a topology (an exclusive lock on `.ops/<name>/lora.lock`);
    LaunchError when another holds it past `timeout_s` (None: wait as long as it takes)."""
    path = topology_dir(topology_name) / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | (fcntl.LOCK_NB if deadline is not None else 0))
                break
            except BlockingIOError:
                if deadline is not None and time.monotonic() >= deadline:
                    raise LaunchError(f"{path}: another `ops lora` command (or `ops up` reloading adapters) holds "
                                      f"it; waited {timeout_s:g} s") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _read_raw(topology_name: str) -> dict[str, LoadedAdapter]:
    path = records_path(topology_name)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise StateError(f"{path}: unreadable ({exc}); remove it if no adapter is loaded") from None
    adapters = data.get("adapters") if isinstance(data, dict) else None
    if not isinstance(adapters, dict):
        raise StateError(f"{path}: not an adapters file (expected {{\"adapters\": {{…}}}})")
    out: dict[str, LoadedAdapter] = {}
    for name, body in adapters.items():
        try:
            replicas = [ReplicaRef(str(r["name"]), _opt(int, r.get("pid")), _opt(float, r.get("create_time")),
                                   _opt(str, r.get("instance"))) for r in body.get("replicas", [])]
            out[str(name)] = LoadedAdapter(str(name), str(body["model"]), str(body["path"]),
                                           float(body["loaded_at"]), replicas, bool(body.get("partial")))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise StateError(f"{path}: adapters.{name}: not an adapter entry") from None
    return out


def read_records(state: FleetState) -> dict[str, LoadedAdapter]:
    """The adapters loaded into the fleet as it runs now (entries from an earlier run left out)."""
    if state.status != "up":
        return {}
    running = {r.name: ReplicaRef.of(state, r) for r in state.processes}
    return {name: entry for name, entry in _read_raw(state.name).items()
            if entry.replicas and all(running.get(r.name) == r for r in entry.replicas)}


def _opt(kind: Callable[[Any], T], value: Any) -> T | None:
    return None if value is None else kind(value)


def write_records(topology_name: str, records: dict[str, LoadedAdapter]) -> Path:
    body = {"version": RECORDS_VERSION, "adapters": {name: entry.to_json() for name, entry in sorted(records.items())}}
    return atomic_write_text(records_path(topology_name), json.dumps(body, indent=2) + "\n")


def runtime_adapters(topology_name: str) -> dict[str, str]:
    """adapter name -> model key for routing (the endpoints file says where each one is served)."""
    try:
        return {name: entry.model for name, entry in _read_raw(topology_name).items()}
    except StateError:
        return {}


def runtime_adapter_paths(topology_name: str) -> dict[str, str]:
    """adapter name -> the directory `ops lora load` loaded it from (the response cache and the gateway key on it)."""
    try:
        return {name: entry.path for name, entry in _read_raw(topology_name).items()}
    except StateError:
        return {}
