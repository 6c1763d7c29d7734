"""What every backend does, per node: check, launch, poll, stop, read logs.

The fleet groups a plan's processes by node (`NodeGroup`) and hands each group to its node's
backend. Everything a backend needs later to find the node and its processes again goes into the
`handle` of the NodeRecord and ProcessRecords it returns; the fleet stores them in state.json and
gives them back, so `down`, `status`, `logs` and `health` work from any later `ops` process.

    preflight(group)        problems that must stop `ops up` before anything starts (unreachable
                            host, refused key, missing command, port taken)
    launch(group)           start every process without waiting -> Launched(node, processes)
    poll(node, records)     what runs now (alive, exit code, new log bytes, a slurm job's state);
                            called every readiness round, so a backend throttles what is costly
    stop(node, records)     stop and verify (no process, port, session or job left); idempotent
    tail / follow           a process's log, wherever it is
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from orchestra_ops.config.nodes import Node
from orchestra_ops.fleet.process_spec import ProcessSpec
from orchestra_ops.fleet.state import NodeRecord, ProcessRecord


@dataclass(frozen=True)
class NodeGroup:
    """What `ops up` starts on one node: the node's settings and its processes."""

    name: str
    backend: str
    node: Node
    specs: tuple[ProcessSpec, ...]

    def describe(self) -> str:
        """`node far (gpu-box)`: how errors name the node."""
        where = self.node.host or "slurm"
        return f"node {self.name} ({where})"


@dataclass(frozen=True)
class LaunchContext:
    """What a backend needs besides the group."""

    topology: str
    cwd: Path  # where `ops up` runs: relative paths (logs) are relative to it on this machine
    nofile: int  # the open-file limit the topology asks for (each node caps it at its hard limit)
    log_dir: str
    tmux_socket: str | None = None  # `ops up --tmux-socket`: the tmux server of every tmux session


@dataclass(frozen=True)
class Launched:
    node: NodeRecord
    processes: list[ProcessRecord]


@dataclass(frozen=True)
class ProcessView:
    """What a backend knows about one process right now."""

    alive: bool
    started: bool = True  # False while its slurm job waits for a node
    exit_code: int | None = None
    uptime_s: float | None = None
    log: bytes = b""  # log bytes after the offset the caller gave (only when it gave one)
    log_end: int | None = None  # the offset after `log`


@dataclass(frozen=True)
class NodeView:
    """What a backend knows about one node right now."""

    node: NodeRecord  # possibly updated: a slurm job's host once it runs
    processes: dict[str, ProcessView]
    state: str = ""  # e.g. "slurm job 12 PENDING (Resources)"; empty when there is nothing to say
    failure: str | None = None  # the node failed as a whole (its job ended, the host went away)
    failure_log: list[str] = field(default_factory=list)  # lines that explain the failure

    def waiting(self, name: str) -> bool:
        view = self.processes.get(name)
        return view is not None and not view.started


@dataclass
class StopReport:
    """What `stop` did and found afterwards; `clean` when nothing of the fleet is left anywhere."""

    terminated: list[str] = field(default_factory=list)  # exited after SIGTERM (or scancel)
    killed: list[str] = field(default_factory=list)  # needed SIGKILL
    already_gone: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)  # "pid 123 (python3)" still alive
    ports_listening: list[str] = field(default_factory=list)
    sessions_left: list[str] = field(default_factory=list)  # tmux sessions
    jobs_left: list[str] = field(default_factory=list)  # slurm jobs
    errors: list[str] = field(default_factory=list)  # a node we could not reach or check

    @property
    def clean(self) -> bool:
        return not (self.leftovers or self.ports_listening or self.sessions_left or self.jobs_left
                    or self.errors)

    def merge(self, other: StopReport) -> StopReport:
        for name in ("terminated", "killed", "already_gone", "leftovers", "ports_listening", "sessions_left",
                     "jobs_left", "errors"):
            getattr(self, name).extend(getattr(other, name))
        return self

    def problems(self) -> str:
        parts = []
        if self.leftovers:
            parts.append(f"still alive: {', '.join(self.leftovers)}")
        parts += self.ports_listening
        parts += [f"tmux session {s} still exists" for s in self.sessions_left]
        parts += self.jobs_left
        parts += self.errors
        return "; ".join(parts)


class Backend(Protocol):
    """The seam between the fleet logic and the outside world, one node at a time."""

    name: str

    def preflight(self, group: NodeGroup, ctx: LaunchContext) -> list[str]:
        """Problems that must stop `ops up` before anything starts, each naming the node."""

    def launch(self, group: NodeGroup, ctx: LaunchContext) -> Launched:
        """Start every process of the group without waiting for readiness."""

    def poll(self, node: NodeRecord, records: Sequence[ProcessRecord],
             log_offsets: Mapping[str, int] | None = None) -> NodeView:
        """The node and its processes now; with `log_offsets`, the log bytes after each offset too."""

    def stop(self, node: NodeRecord, records: Sequence[ProcessRecord], timeout: float) -> StopReport:
        """Stop every process of the node (group SIGTERM, wait, SIGKILL; or scancel) and verify."""

    def tail(self, node: NodeRecord, record: ProcessRecord, lines: int, *, settle: bool = False) -> list[str]:
        """The last `lines` lines of this run of the process's log (`settle`: once it stops growing)."""

    def follow(self, node: NodeRecord, record: ProcessRecord) -> Iterator[str]:
        """Lines appended to the log from now on, until the caller stops iterating."""

    def close(self) -> None:
        """Release connections."""
