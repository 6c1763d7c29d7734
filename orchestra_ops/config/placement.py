"""Which GPUs (or, for the CPU build of vLLM, which cores) each process gets on its node.

Explicit claims come first (a model's `gpus:` list, a service's `gpu:`), then every model without
a list takes the lowest free indices, in declaration order, `gpus_per_replica` per replica.
Problems are returned as `(path, message)` pairs for the topology checks; the planner only ever
sees a placement without problems.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from orchestra_ops.config.layout import host_count, layout, shape_ok, tensor_parallel, uses_new_layout

if TYPE_CHECKING:
    from orchestra_ops.config.nodes import Node
    from orchestra_ops.config.topology import Topology

Problem = tuple[tuple[Any, ...], str]
VLLM_DEFAULT_GPU_MEMORY_UTILIZATION = 0.9


def replica_name(group: str, index: int) -> str:
    return f"{group}/{index}"


def machine_name(node: str, host_index: int, hosts: int) -> str:
    """The node of one host of a node that spans hosts (`pair@1`), else the node's own name."""
    return node if hosts == 1 else f"{node}@{host_index}"


def machine_node(topology: Topology, machine: str) -> Node:
    """The node settings of a machine name: a node's own, or one host of a node that spans hosts (`pair@1`)."""
    if machine in topology.nodes:
        return topology.nodes[machine]
    name, _, index = machine.rpartition("@")
    return topology.nodes[name].host_nodes()[int(index)]


def process_devices(topology: Topology, key: str) -> list[tuple[str, str, int]]:
    """(machine, process, devices) for each process of model `key` that holds devices, in order."""
    model = topology.models[key]
    if not uses_new_layout(model):
        return [(model.node, replica_name(key, index), model.gpus_per_replica) for index in range(model.replicas)]
    if not shape_ok(topology, key):
        return []  # its shape problem is reported instead
    shape = layout(topology, key)
    cpu = model.engine == "vllm" and model.gpus_per_replica == 0  # the CPU build: cores, not GPUs (place_cpus)
    return [(machine_name(model.node, slot.host_index, shape.hosts), slot.name, 0 if cpu else slot.devices)
            for slot in shape.slots if slot.devices]


def place_gpus(topology: Topology) -> tuple[dict[str, tuple[int, ...]], list[Problem]]:
    """Return process name -> GPU indices, and the problems found while placing."""
    placement: dict[str, tuple[int, ...]] = {}
    problems: list[Problem] = []
    users: dict[tuple[str, int], list[str]] = defaultdict(list)  # (node, gpu) -> process names
    where: dict[str, tuple[Any, ...]] = {}

    def claim(node_name: str, process: str, gpus: tuple[int, ...], path: tuple[Any, ...]) -> None:
        placement[process] = gpus
        where[process] = path
        for gpu in gpus:
            users[(node_name, gpu)].append(process)

    # 1. explicit claims
    for key, model in topology.models.items():
        node = topology.nodes.get(model.node)
        if node is None:
            continue
        if model.gpus is None:
            continue
        slots = process_devices(topology, key)
        need = sum(count for _, _, count in slots)
        if len({machine for machine, _, _ in slots}) > 1:
            problems.append((("models", key, "gpus"), f"a GPU list applies to a model on one host; node "
                             f"'{model.node}' has {host_count(node)}: leave gpus out (each host's lowest free)"))
            continue
        if len(model.gpus) != need:
            problems.append((("models", key, "gpus"),
                             f"lists {len(model.gpus)} GPUs but replicas × gpus_per_replica = "
                             f"{model.replicas} × {model.gpus_per_replica} = {model.gpu_count}"
                             if not uses_new_layout(model) else
                             f"lists {len(model.gpus)} GPUs but the layout needs {need} "
                             f"({model.replicas} ranks × TP {tensor_parallel(model)} × PP {model.pipeline_parallel})"))
            continue
        bad = [g for g in model.gpus if g >= node.gpu_count]
        if bad:
            problems.append((("models", key, "gpus"),
                             f"GPU {bad[0]} is out of range: node '{model.node}' has {node.gpu_count} GPUs "
                             f"(0..{node.gpu_count - 1})" if node.gpu_count else
                             f"GPU {bad[0]} is out of range: node '{model.node}' has no GPUs"))
            continue
        at = 0
        for machine, process, count in slots:
            claim(machine, process, tuple(model.gpus[at:at + count]), ("models", key, "gpus"))
            at += count
    for key, service in topology.services.items():
        node = topology.nodes.get(service.node)
        if node is None or service.gpu is None:
            if node is not None:
                placement[key] = ()
            continue
        if service.gpu >= node.gpu_count:
            problems.append((("services", key, "gpu"),
                             f"GPU {service.gpu} is out of range: node '{service.node}' has "
                             f"{node.gpu_count} GPUs" + (f" (0..{node.gpu_count - 1})" if node.gpu_count else "")))
            continue
        claim(service.node, key, (service.gpu,), ("services", key, "gpu"))

    # 2. automatic placement, lowest free index first (on each host of the node)
    for key, model in topology.models.items():
        node = topology.nodes.get(model.node)
        if node is None or model.gpus is not None:
            continue
        slots = process_devices(topology, key)
        free: dict[str, list[int]] = {}
        for machine in dict.fromkeys(m for m, _, _ in slots):
            taken = {gpu for (n, gpu) in users if n == machine}
            free[machine] = [g for g in range(node.gpu_count) if g not in taken]
        needs: dict[str, int] = defaultdict(int)
        for machine, _, count in slots:
            needs[machine] += count
        short = [m for m, count in needs.items() if count > len(free[m])]
        if short:
            need = needs[short[0]]
            problems.append((("models", key, "replicas"),
                             f"{model.replicas} replicas × {model.gpus_per_replica} GPUs = {model.gpu_count} GPUs "
                             f"do not fit node '{model.node}' ({node.gpu_count} GPUs, {len(free[short[0]])} free)"
                             if not uses_new_layout(model) else
                             f"{model.replicas} ranks × TP {tensor_parallel(model)} × PP {model.pipeline_parallel} "
                             f"need {need} GPUs on host '{short[0]}' of node '{model.node}', which has "
                             f"{node.gpu_count} GPUs ({len(free[short[0]])} free)"))
            continue
        for machine, process, count in slots:
            claim(machine, process, tuple(free[machine][:count]), ("models", key, "gpus"))
            free[machine] = free[machine][count:]
    for key, model in topology.models.items():  # a Ray model's server runs with its head's GPUs
        if model.node in topology.nodes and uses_new_layout(model) and shape_ok(topology, key) \
                and layout(topology, key).ray:
            head = f"{key}/ray0"
            if head in placement:
                placement[replica_name(key, 0)] = placement[head]

    # 3. sharing
    for (node_name, gpu), names in sorted(users.items()):
        if len(names) < 2:
            continue
        shares = [_memory_share(topology, name) for name in names]
        if any(share is None for share in shares):
            problems.append((where[names[1]],
                             f"GPU {gpu} of node '{node_name}' is shared by {' and '.join(names)}; "
                             "give each its own GPU, or set gpu_memory_utilization on every sharer"))
        elif sum((s for s in shares if s is not None), 0.0) > 1.0 + 1e-9:
            total = sum((s for s in shares if s is not None), 0.0)
            problems.append((where[names[1]],
                             f"GPU {gpu} of node '{node_name}' is shared by {' and '.join(names)} whose "
                             f"gpu_memory_utilization sums to {total:.2f} (over 1.0)"))
    return placement, problems


def _memory_share(topology: Topology, process: str) -> float | None:
    """The declared memory share of a process, or None when it may take the whole GPU."""
    group = process.split("/")[0]
    model = topology.models.get(group)
    if model is None or "/" not in process:
        return None  # services do not declare their memory
    return model.gpu_memory_utilization


def place_cpus(topology: Topology) -> tuple[dict[str, str], list[Problem]]:
    """Process name -> `VLLM_CPU_OMP_THREADS_BIND` value for CPU vLLM replicas (gpus_per_replica 0).

    The CPU analogue of CUDA_VISIBLE_DEVICES: without it every replica pins its OpenMP threads to core 0.
    Each node's CPU replicas take consecutive cores from 0, `cpus_per_replica` (default 1) each, in
    declaration order; a node that declares `cpus` must have enough. A process that runs several ranks
    (tensor or pipeline parallel, vLLM's own data parallel) gets one core list per rank, joined by `|`
    in vLLM's rank order (DP, PP, TP); each host of a node that spans hosts counts its own cores. A Ray
    model's server is bound as its head's ranks (vLLM hands its VLLM_ variables to every Ray worker).
    """
    binds: dict[str, str] = {}
    problems: list[Problem] = []
    next_core: dict[str, int] = defaultdict(int)
    for key, model in topology.models.items():
        if model.engine != "vllm" or model.gpus_per_replica != 0 or model.node not in topology.nodes:
            continue
        width = model.cpus_per_replica or 1
        declared = topology.nodes[model.node].cpus
        if uses_new_layout(model):
            slots = _cpu_slots(topology, key)
        else:
            slots = [(model.node, replica_name(key, index), 1) for index in range(model.replicas)]
        for machine, process, ranks in slots:
            lists = []
            for _ in range(ranks):
                first = next_core[machine]
                last = first + width - 1
                next_core[machine] = last + 1
                lists.append(str(first) if width == 1 else f"{first}-{last}")
            if declared is not None and next_core[machine] > declared:
                what = (f"{model.replicas} CPU replicas x {width} cores" if not uses_new_layout(model) else
                        f"{model.replicas} ranks × TP {tensor_parallel(model)} × PP {model.pipeline_parallel} x "
                        f"{width} cores")
                problems.append((("models", key, "replicas"), (
                    f"{what} need cores up to {next_core[machine] - 1}, but node '{model.node}' declares "
                    f"cpus: {declared}")))
                break
            binds[process] = "|".join(lists)
        else:
            if uses_new_layout(model) and shape_ok(topology, key) and layout(topology, key).ray:
                binds[replica_name(key, 0)] = binds[f"{key}/ray0"]
    return binds, problems


def _cpu_slots(topology: Topology, key: str) -> list[tuple[str, str, int]]:
    """(machine, process, ranks) of a CPU model laid out by config/layout.py."""
    if not shape_ok(topology, key):
        return []
    shape = layout(topology, key)
    return [(machine_name(topology.models[key].node, slot.host_index, shape.hosts), slot.name, slot.devices)
            for slot in shape.slots if slot.devices]
