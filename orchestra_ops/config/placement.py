"""Which GPUs (or, for the CPU build of vLLM, which cores) each process gets on its node.

Explicit claims come first (a model's `gpus:` list, a service's `gpu:`), then every model without
a list takes the lowest free indices, in declaration order, `gpus_per_replica` per replica.
Problems are returned as `(path, message)` pairs for the topology checks; the planner only ever
sees a placement without problems.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestra_ops.config.topology import Topology

Problem = tuple[tuple[Any, ...], str]
VLLM_DEFAULT_GPU_MEMORY_UTILIZATION = 0.9


def replica_name(group: str, index: int) -> str:
    return f"{group}/{index}"


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
        if len(model.gpus) != model.gpu_count:
            problems.append((("models", key, "gpus"),
                             f"lists {len(model.gpus)} GPUs but replicas × gpus_per_replica = "
                             f"{model.replicas} × {model.gpus_per_replica} = {model.gpu_count}"))
            continue
        bad = [g for g in model.gpus if g >= node.gpu_count]
        if bad:
            problems.append((("models", key, "gpus"),
                             f"GPU {bad[0]} is out of range: node '{model.node}' has {node.gpu_count} GPUs "
                             f"(0..{node.gpu_count - 1})" if node.gpu_count else
                             f"GPU {bad[0]} is out of range: node '{model.node}' has no GPUs"))
            continue
        step = model.gpus_per_replica
        for index in range(model.replicas):
            chunk = tuple(model.gpus[index * step:(index + 1) * step])
            claim(model.node, replica_name(key, index), chunk, ("models", key, "gpus"))
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

    # 2. automatic placement, lowest free index first
    for key, model in topology.models.items():
        node = topology.nodes.get(model.node)
        if node is None or model.gpus is not None:
            continue
        taken = {gpu for (n, gpu) in users if n == model.node}
        free = [g for g in range(node.gpu_count) if g not in taken]
        if model.gpu_count > len(free):
            problems.append((("models", key, "replicas"),
                             f"{model.replicas} replicas × {model.gpus_per_replica} GPUs = {model.gpu_count} GPUs "
                             f"do not fit node '{model.node}' ({node.gpu_count} GPUs, {len(free)} free)"))
            continue
        step = model.gpus_per_replica
        for index in range(model.replicas):
            claim(model.node, replica_name(key, index), tuple(free[index * step:(index + 1) * step]),
                  ("models", key, "gpus"))

    # 3. sharing
    for (node_name, gpu), names in sorted(users.items()):
        if len(names) < 2:
            continue
        shares = [_memory_share(topology, name) for name in names]
        if any(share is None for share in shares):
            problems.append((where[names[1]],
                             f"GPU {gpu} of node '{node_name}' is shared by {' and '.join(names)}; "
                             "give each its own GPU, or set gpu_memory_utilization on every sharer"))
        elif sum(s for s in shares if s is not None) > 1.0 + 1e-9:
            total = sum(s for s in shares if s is not None)
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
    declaration order; a node that declares `cpus` must have enough.
    """
    binds: dict[str, str] = {}
    problems: list[Problem] = []
    next_core: dict[str, int] = defaultdict(int)
    for key, model in topology.models.items():
        if model.engine != "vllm" or model.gpus_per_replica != 0 or model.node not in topology.nodes:
            continue
        width = model.cpus_per_replica or 1
        declared = topology.nodes[model.node].cpus
        for index in range(model.replicas):
            first = next_core[model.node]
            last = first + width - 1
            next_core[model.node] = last + 1
            if declared is not None and last >= declared:
                problems.append((("models", key, "replicas"), (
                    f"{model.replicas} CPU replicas x {width} cores need cores up to {last}, but node "
                    f"'{model.node}' declares cpus: {declared}")))
                break
            binds[replica_name(key, index)] = str(first) if width == 1 else f"{first}-{last}"
    return binds, problems
