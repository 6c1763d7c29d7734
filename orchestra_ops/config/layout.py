"""One model's layout over its node's hosts (config/parallel.py has the schema and the table of modes).

`layout()` is pure: the processes of one model (`Slot`s: which host, how many devices, which DP ranks and
PP stages, which port). `shape_problems()` names each shape that cannot work, at its field;
`planned_ports()` lists every port a laid-out model listens on, for the topology's port check.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from orchestra_ops.config.model_spec import ModelSpec
from orchestra_ops.config.nodes import Node
from orchestra_ops.config.parallel import VLLM_DP_RPC_PORT, DpMode, RaySettings, ranks_step_together, ray_ports
from orchestra_ops.config.topology import Topology

Problem = tuple[tuple[Any, ...], str]

SlotRole = Literal["server", "ray-head", "ray-worker"]


@dataclass(frozen=True)
class Slot:
    """One process of a model's layout."""

    name: str  # "big/0", "big/ray0"
    role: SlotRole
    host_index: int  # which host of the node (0 unless the node spans hosts)
    port: int  # its HTTP port (servers) or the Ray port that shows it is up (GCS, node manager)
    devices: int  # GPUs (GPU node) or CPU ranks (CPU node) it needs on its host
    dp_ranks: tuple[int, ...] = ()  # the data-parallel ranks this server runs
    stages: tuple[int, ...] = ()  # the pipeline stages on its host
    serves: bool = True  # answers HTTP (an endpoint); Ray nodes do not


@dataclass(frozen=True)
class Layout:
    """How one model's ranks and stages sit on its node's hosts."""

    key: str
    mode: DpMode
    tp: int
    pp: int
    dp: int
    hosts: int  # hosts of the node the model spans
    ray: bool  # a TP×PP group through Ray: it spans hosts, or `ray:` asks for it on one host
    slots: tuple[Slot, ...]

    @property
    def servers(self) -> tuple[Slot, ...]:
        return tuple(s for s in self.slots if s.role == "server")

    @property
    def lockstep(self) -> bool:
        """Its processes step together (one failure domain): DP ranks of vLLM, or a Ray TP×PP group."""
        return self.ray or ranks_step_together(self.mode, self.dp)


def host_count(node: Node) -> int:
    if node.hosts:
        return len(node.hosts)
    if node.slurm is not None:
        return node.slurm.nodes
    return 1


def tensor_parallel(model: ModelSpec) -> int:
    return model.tensor_parallel or max(model.gpus_per_replica, 1)


def devices_per_group(model: ModelSpec) -> int:
    """GPUs (or CPU ranks) one TP×PP group needs: gpus_per_replica as given, else TP × PP."""
    if "gpus_per_replica" in model.model_fields_set and model.gpus_per_replica > 0:
        return model.gpus_per_replica
    return tensor_parallel(model) * model.pipeline_parallel


def uses_new_layout(model: ModelSpec) -> bool:
    """Anything beyond today's one server per replica with TP = gpus_per_replica."""
    return (model.tensor_parallel is not None or model.pipeline_parallel > 1 or model.data_parallel.in_vllm
            or model.data_parallel.expert_parallel or model.ray is not None)


def layout(topology: Topology, key: str) -> Layout:
    """The processes of model `key` (the topology must have passed `shape_problems`)."""
    model = topology.models[key]
    node = topology.nodes[model.node]
    hosts = host_count(node)
    tp, pp, dp, mode = tensor_parallel(model), model.pipeline_parallel, model.replicas, model.data_parallel.mode
    group = devices_per_group(model)
    slots: list[Slot] = []
    if mode == "replicas" and (hosts > 1 or model.ray is not None):  # one TP×PP group over the hosts, via Ray
        per_host = pp // hosts
        settings = model.ray or RaySettings()
        for index in range(hosts):
            port = ray_ports(settings, index, hosts)
            slots.append(Slot(name=f"{key}/ray{index}", role="ray-head" if index == 0 else "ray-worker",
                              host_index=index, port=port.gcs if port.gcs is not None else port.node_manager,
                              devices=group // hosts, stages=tuple(range(index * per_host, (index + 1) * per_host)),
                              serves=False))
        slots.insert(1, Slot(name=f"{key}/0", role="server", host_index=0, port=model.port, devices=0,
                             dp_ranks=(0,), stages=tuple(range(pp))))
        return Layout(key, mode, tp, pp, dp, hosts, True, tuple(slots))
    if mode == "replicas":
        for index in range(dp):
            slots.append(Slot(name=f"{key}/{index}", role="server", host_index=0, port=model.port + index,
                              devices=group, dp_ranks=(index,), stages=tuple(range(pp))))
    elif mode == "vllm-internal":
        slots.append(Slot(name=f"{key}/0", role="server", host_index=0, port=model.port, devices=group * dp,
                          dp_ranks=tuple(range(dp)), stages=tuple(range(pp))))
    elif mode == "vllm-hybrid":
        local = dp // hosts
        for index in range(hosts):
            slots.append(Slot(name=f"{key}/{index}", role="server", host_index=index, port=model.port,
                              devices=group * local, dp_ranks=tuple(range(index * local, (index + 1) * local)),
                              stages=tuple(range(pp))))
    else:  # vllm-external: one server per rank, ranks spread evenly over the hosts
        local = dp // hosts
        for rank in range(dp):
            slots.append(Slot(name=f"{key}/{rank}", role="server", host_index=rank // local,
                              port=model.port + rank % local, devices=group, dp_ranks=(rank,),
                              stages=tuple(range(pp))))
    return Layout(key, mode, tp, pp, dp, hosts, False, tuple(slots))


def shape_ok(topology: Topology, key: str) -> bool:
    """Whether model `key` has a shape `layout` can lay out (its node exists and no shape problem)."""
    model = topology.models[key]
    node = topology.nodes.get(model.node)
    return node is not None and next(_model_shape(key, model, node), None) is None


def shape_problems(topology: Topology) -> Iterator[Problem]:
    """Shapes that cannot work, each at the field to change."""
    for key, model in topology.models.items():
        node = topology.nodes.get(model.node)
        if node is None:
            continue
        yield from _model_shape(key, model, node)


def _model_shape(key: str, model: ModelSpec, node: Node) -> Iterator[Problem]:
    path: tuple[Any, ...] = ("models", key)
    hosts, dp_mode = host_count(node), model.data_parallel.mode
    tp, pp, dp = tensor_parallel(model), model.pipeline_parallel, model.replicas
    where = f"node '{model.node}'" + (f" ({hosts} hosts)" if hosts > 1 else "")
    if model.engine != "vllm":
        for field in ("tensor_parallel", "data_parallel", "ray"):
            if field in model.model_fields_set:
                yield (*path, field), "applies only to engine: vllm"
        if model.pipeline_parallel > 1:
            yield (*path, "pipeline_parallel"), "applies only to engine: vllm"
        if hosts > 1:
            yield (*path, "node"), f"{where} spans hosts; engine: {model.engine} runs on one host (a node with host:)"
        return
    if ("gpus_per_replica" in model.model_fields_set and model.gpus_per_replica > 0
            and model.gpus_per_replica != tp * pp and (model.tensor_parallel is not None or pp > 1)):
        yield (*path, "gpus_per_replica"), (
            f"{model.gpus_per_replica} GPUs per replica, but tensor_parallel × pipeline_parallel = {tp} × {pp} = "
            f"{tp * pp} (leave gpus_per_replica out: it follows from them)")
    if model.ray is not None and dp_mode != "replicas":
        yield (*path, "ray"), ("a Ray cluster runs one TP×PP group (data_parallel mode replicas); vLLM's own data "
                               "parallelism starts its ranks itself")
    if model.ray is not None and hosts == 1 and dp > 1:
        yield (*path, "replicas"), (
            f"a model on Ray (ray: set) runs one TP×PP group (one Ray cluster); replicas: {dp} would need one "
            "cluster each: declare a model per group")
    if model.data_parallel.expert_parallel and not model.data_parallel.in_vllm:
        yield (*path, "data_parallel", "expert_parallel"), (
            "expert parallelism needs vLLM's own data parallelism (the ranks step together): set "
            "data_parallel.mode to vllm-internal, vllm-hybrid or vllm-external")
    if model.data_parallel.rpc_port is not None and not model.data_parallel.in_vllm:
        yield (*path, "data_parallel", "rpc_port"), "applies only to vLLM's own data parallelism (mode vllm-*)"
    if hosts == 1:
        if dp_mode == "vllm-hybrid":
            yield (*path, "data_parallel", "mode"), (
                f"vllm-hybrid runs one API server per host, and {where} is one host; use vllm-internal "
                "(one server, one endpoint) or vllm-external (one server per rank)")
        return
    if node.slurm is not None and dp_mode != "replicas":
        yield (*path, "data_parallel", "mode"), (
            f"{where} is a slurm allocation of {hosts} nodes: vLLM's own data parallelism across a job's nodes is "
            "not planned in this version (stages across them through Ray are); use a `hosts:` node")
        return
    if dp_mode == "replicas":
        if dp > 1:
            yield (*path, "replicas"), (
                f"a model whose stages span the {hosts} hosts of {where} runs one TP×PP group (one Ray cluster); "
                f"replicas: {dp} would need one cluster each: declare a model per group, or use data_parallel "
                "mode vllm-hybrid/vllm-external with each rank on one host")
        elif pp % hosts:
            yield (*path, "pipeline_parallel"), (
                f"{pp} pipeline stages cannot be split evenly over the {hosts} hosts of {where} (tensor parallel "
                f"stays inside a host; stages go across hosts): use pipeline_parallel: {hosts} or a multiple")
    elif dp_mode == "vllm-internal":
        yield (*path, "data_parallel", "mode"), (
            f"vllm-internal runs on one host and {where} spans {hosts}: use vllm-hybrid (one API server per "
            "host) or vllm-external (one server per rank)")
    elif dp % hosts:
        yield (*path, "replicas"), (
            f"{dp} data-parallel ranks cannot be split evenly over the {hosts} hosts of {where}: use a multiple "
            f"of {hosts}")


def planned_ports(topology: Topology, key: str) -> list[tuple[tuple[Any, ...], int, int, str]]:
    """(field path, host index, port, what) for every port model `key` listens on, new layouts only."""
    model = topology.models[key]
    shape = layout(topology, key)
    ports: list[tuple[tuple[Any, ...], int, int, str]] = []
    for slot in shape.servers:
        ports.append((("models", key, "port"), slot.host_index, slot.port, f"server {slot.name}"))
    if model.data_parallel.in_vllm and shape.dp > 1:
        rpc = model.data_parallel.rpc_port or VLLM_DP_RPC_PORT
        ports.append((("models", key, "data_parallel", "rpc_port"), 0, rpc, "its data-parallel RPC port"))
    if shape.ray:
        settings = model.ray or RaySettings()
        for slot in shape.slots:
            if slot.role == "server":
                continue
            for port in ray_ports(settings, slot.host_index, shape.hosts).all():
                ports.append((("models", key, "ray", "port"), slot.host_index, port, f"Ray node {slot.name}"))
    return ports
