"""What `ops health` and `ops status` show: a fleet's processes, from state.json and live probes."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestra_ops import procs
from orchestra_ops.fleet import target_of
from orchestra_ops.health import DEFAULT_PROBE_TIMEOUT_S, Probe, probe_all_sync
from orchestra_ops.state import FleetState, read_state, resolve_name

# Variables that send requests to an external provider (keys or base URLs). Only names are reported.
PROVIDER_ENV_VARS: tuple[str, ...] = (
    "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE", "AZURE_OPENAI_API_KEY", "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY", "GOOGLE_API_KEY", "MISTRAL_API_KEY", "TOGETHER_API_KEY", "GROQ_API_KEY",
    "DEEPSEEK_API_KEY", "OPENROUTER_API_KEY", "FIREWORKS_API_KEY", "HF_TOKEN",
)


def undeclared_provider_vars(declared: list[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """Provider variables set in the environment that no provider of the topology names."""
    env = os.environ if environ is None else environ
    return [name for name in PROVIDER_ENV_VARS if env.get(name) and name not in declared]


@dataclass(frozen=True)
class HealthReport:
    topology: str
    probes: list[Probe]
    undeclared_env: list[str]

    @property
    def all_ready(self) -> bool:
        return bool(self.probes) and all(p.ready for p in self.probes)

    def to_json(self) -> dict[str, Any]:
        return {"topology": self.topology, "processes": [p.to_json() for p in self.probes]}


def health(name: str | None = None, *, timeout_s: float = DEFAULT_PROBE_TIMEOUT_S) -> HealthReport:
    """Probe every process of a topology (default: the most recent one up) concurrently."""
    state = read_state(resolve_name(name))
    targets = [target_of(r, alive=procs.is_alive(r.pid, r.create_time)) for r in state.processes]
    return HealthReport(topology=state.name, probes=probe_all_sync(targets, timeout=timeout_s),
                        undeclared_env=undeclared_provider_vars(state.provider_key_envs))


@dataclass(frozen=True)
class ProcessStatus:
    name: str
    pid: int
    alive: bool
    uptime_s: float | None
    port: int
    log: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "pid": self.pid, "alive": self.alive,
                "uptime_s": None if self.uptime_s is None else round(self.uptime_s, 1),
                "port": self.port, "log": self.log}


@dataclass(frozen=True)
class StatusReport:
    state: FleetState
    processes: list[ProcessStatus]

    def to_json(self) -> dict[str, Any]:
        return {"topology": self.state.name, "processes": [p.to_json() for p in self.processes]}


def status(name: str | None = None) -> StatusReport:
    """The process view from state.json (default: the most recent topology up, else the latest)."""
    state = read_state(resolve_name(name, up_only=False))
    now = time.time()
    rows = []
    for record in state.processes:
        alive = procs.is_alive(record.pid, record.create_time)
        rows.append(ProcessStatus(name=record.name, pid=record.pid, alive=alive,
                                  uptime_s=now - record.create_time if alive else None,
                                  port=record.port, log=record.log))
    return StatusReport(state=state, processes=rows)


def find_log(process: str, topology: str | None = None) -> str:
    """The log file of process `process` ("answer/1", or "answer-1" as in the file name)."""
    state = read_state(resolve_name(topology, up_only=False))
    for record in state.processes:
        if process in (record.name, record.name.replace("/", "-")):
            return record.log
    return state.by_name(process).log  # raises StateError naming the known processes
