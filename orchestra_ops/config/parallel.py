"""Models bigger than one GPU or one host, and vLLM's own data parallelism: the schema and the layout.

Per model (see ModelSpec): `tensor_parallel` (default `gpus_per_replica`; on a CPU node the only way to
ask for TP), `pipeline_parallel` (stages), `data_parallel: {mode, expert_parallel, rpc_port, pin_ranks}`
where `replicas` is the data-parallel size, and `ray:` (the ports of a Ray cluster, when the model spans
several hosts). A node spans several hosts with `hosts: [a, b]` or a slurm node with `slurm.nodes: N`.

    mode            processes                                        endpoints
    replicas        one `vllm serve` per TP×PP group (today's)       one per server
    vllm-internal   one `vllm serve --data-parallel-size N`          one (vLLM balances; ops pins a
                    on one host                                      task to a rank, X-data-parallel-rank)
    vllm-hybrid     one API server per host, its local ranks         one per host
                    (`--data-parallel-hybrid-lb`, start rank)
    vllm-external   one `vllm serve --data-parallel-rank i` per rank one per rank (ops's pool balances)

A TP×PP group that spans hosts (pipeline stages across the hosts of a node) runs through Ray: `ray start
--head` on the first host, one `ray start --address` per other host, then `vllm serve
--distributed-executor-backend ray` on the first host once every Ray node has joined (fleet/ray_plan.py).

This module is the schema and the Ray port plan; config/layout.py lays a model out (`layout()`, pure: the
processes of one model, which host, how many devices, which DP ranks and PP stages, which port) and names
each shape that cannot work at its field (`shape_problems()`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field

from orchestra_ops.config.nodes import Strict

Port = Annotated[int, Field(ge=1, le=65535)]
DpMode = Literal["replicas", "vllm-internal", "vllm-hybrid", "vllm-external"]
VLLM_DP_RPC_PORT = 29550  # vLLM's own default --data-parallel-rpc-port
RAY_NODE_PORTS = 6  # node manager, object manager, metrics export, dashboard agent grpc + http, runtime env agent
RAY_HEAD_PORTS = 2  # GCS, ray client server


def ranks_step_together(mode: DpMode, ranks: int) -> bool:
    """Whether `ranks` data-parallel ranks in `mode` are one failure domain: the ranks of vLLM's hybrid and
    external modes coordinate every step, so one dead rank stalls the others."""
    return mode in ("vllm-hybrid", "vllm-external") and ranks > 1


class DataParallel(Strict):
    """How a model's `replicas` (its data-parallel size) run."""

    mode: DpMode = "replicas"
    expert_parallel: bool = False  # vLLM's --enable-expert-parallel (MoE experts spread over the DP×TP ranks)
    rpc_port: Port | None = None  # --data-parallel-rpc-port on the first host (default: vLLM's 29550)
    pin_ranks: bool = True  # vllm-internal: a session's calls carry X-data-parallel-rank (with affinity on)

    @property
    def in_vllm(self) -> bool:
        return self.mode != "replicas"


class RaySettings(Strict):
    """The ports of the Ray cluster of a model that spans hosts (or, set on a one-host model, a one-node Ray
    cluster for vLLM's Ray executor there): all of them follow from `port`.

    Head: GCS `port`, client server `port+1`. Ray node i (0 is the head): node manager, object manager,
    metrics export, dashboard agent (grpc, http), runtime env agent at `port+2+6i …`; its workers take
    `worker_ports` ports after the last node's block (so two Ray nodes on one machine never collide).
    """

    port: Port = 6379
    worker_ports: int = Field(64, ge=4, le=10000)


@dataclass(frozen=True)
class RayPorts:
    """Every port one Ray node of a model listens on (planned, so checked like any host:port)."""

    gcs: int | None  # the head only
    client_server: int | None  # the head only
    node_manager: int
    object_manager: int
    metrics_export: int
    dashboard_agent_grpc: int
    dashboard_agent_listen: int
    runtime_env_agent: int
    min_worker: int
    max_worker: int

    def all(self) -> list[int]:
        fixed = [self.gcs, self.client_server, self.node_manager, self.object_manager, self.metrics_export,
                 self.dashboard_agent_grpc, self.dashboard_agent_listen, self.runtime_env_agent]
        return [p for p in fixed if p is not None] + list(range(self.min_worker, self.max_worker + 1))


def ray_ports(settings: RaySettings, index: int, nodes: int) -> RayPorts:
    """The ports of Ray node `index` of `nodes` (0 is the head)."""
    base = settings.port + RAY_HEAD_PORTS + RAY_NODE_PORTS * index
    workers = settings.port + RAY_HEAD_PORTS + RAY_NODE_PORTS * nodes + settings.worker_ports * index
    head = index == 0
    return RayPorts(gcs=settings.port if head else None, client_server=settings.port + 1 if head else None,
                    node_manager=base, object_manager=base + 1, metrics_export=base + 2,
                    dashboard_agent_grpc=base + 3, dashboard_agent_listen=base + 4, runtime_env_agent=base + 5,
                    min_worker=workers, max_worker=workers + settings.worker_ports - 1)
