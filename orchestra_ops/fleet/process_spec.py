"""One process of a LaunchPlan (fleet/plan.py): what to run, where, and how to tell it is serving.

Plain data: the planner fills it, the backends start it, state.json keeps what `ops health` and repair read.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from orchestra_ops.fleet.state import server_url

Engine = Literal["vllm", "sim", "retrieval", "gateway", "ray"]


@dataclass(frozen=True)
class ProcessSpec:
    """One process of the fleet: what to run, where, and how to tell it is serving."""

    name: str  # "orchestrator/2", or the service name
    group: str  # the model or service key
    kind: Engine
    node: str
    host: str | None  # where clients connect; None until a slurm node is allocated
    bind_host: str
    port: int
    gpus: tuple[int, ...]
    argv: tuple[str, ...]
    env: Mapping[str, str]
    log: str
    served_model_name: str | None  # None for services
    ulimit_nofile: int
    endpoint_key: str  # the key in the endpoints file
    adapters: tuple[str, ...] = ()  # LoRA adapters it serves from the start (more endpoints keys)
    # bigger models (config/layout.py, fleet/parallel_plan.py): what part of its model this process runs
    role: str = "server"  # server | ray-head | ray-worker (Ray nodes serve no endpoint)
    ranks: tuple[int, ...] = ()  # the data-parallel ranks a vLLM server runs (vLLM's own DP), else ()
    stages: tuple[int, ...] = ()  # the pipeline stages on its host (PP > 1), else ()
    domain: str | None = None  # its failure domain (the model key) when its processes step together
    gate: int = 0  # argv words before the engine's own command (the Ray gate that waits for every node)
    host_index: int = 0  # which host of a slurm allocation of several nodes it runs on (0: the batch host)
    more_ports: tuple[int, ...] = ()  # every other port it listens on (a Ray node's): checked free before and after

    @property
    def serves(self) -> bool:
        """An endpoint (an HTTP server in the endpoints file), not a Ray node."""
        return self.role == "server"

    def layout_fields(self) -> dict[str, Any]:
        """What its ProcessRecord keeps of its part in a bigger model (state.json; `ops health` shows it)."""
        return {"role": self.role, "ranks": list(self.ranks), "stages": list(self.stages), "domain": self.domain,
                "host_index": self.host_index, "more_ports": list(self.more_ports)}

    @property
    def engine_argv(self) -> tuple[str, ...]:
        """The engine's own command (`vllm serve …`), without the gate in front of it."""
        return self.argv[self.gate:]

    @property
    def base_url(self) -> str | None:
        return None if self.host is None else server_url(self.host, self.port)

    @property
    def health_url(self) -> str | None:
        return None if self.base_url is None else f"{self.base_url}/health"

    @property
    def reproduce(self) -> str:
        """A shell line that starts this process by hand, every value quoted."""
        assignments = [f"{key}={shlex.quote(value)}" for key, value in self.env.items()]
        return " ".join(["env", *assignments, shlex.join(self.argv)])

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "node": self.node,
            "host": self.host,
            "port": self.port,
            "gpus": list(self.gpus),
            "argv": list(self.argv),
            "env": dict(self.env),
            "log": self.log,
            "health_url": self.health_url,
            "kind": self.kind,
            "served_model_name": self.served_model_name,
            "adapters": list(self.adapters),
            **({"role": self.role, "ranks": list(self.ranks), "stages": list(self.stages), "domain": self.domain}
               if self.role != "server" or self.ranks or self.stages or self.domain else {}),
            "reproduce": self.reproduce,
        }
