"""The commands of a model laid out by config/layout.py: vLLM's data-parallel flags, and Ray across hosts.

    vllm-internal   vllm serve … --data-parallel-size N --data-parallel-rpc-port P [--enable-expert-parallel]
    vllm-hybrid     per host h: … --data-parallel-size N --data-parallel-size-local L --data-parallel-start-rank h·L
                    --data-parallel-address HEAD --data-parallel-rpc-port P --data-parallel-hybrid-lb
    vllm-external   per rank i: … --data-parallel-size N --data-parallel-rank i --data-parallel-address HEAD
                    --data-parallel-rpc-port P (vLLM infers --data-parallel-external-lb from the rank)
    across hosts    ray start --head --block … on the first host, ray start --address HEAD:GCS --block … on
                    the others (every port planned: config/parallel.RayPorts), and on the first host the Ray
                    gate (ray_gate.py) in front of vllm serve … --distributed-executor-backend ray

Each Ray node's address is its host's (this machine's: its `bind` when that names one address; note that
Ray itself turns 127.0.0.1, localhost and ::1 into the machine's outward address, so a cluster kept on
loopback binds another loopback address, e.g. `bind: 127.0.0.3`). Ray runs from the engine's own
environment: the `ray` beside the node's `vllm` command (a venv's bin/), else `ray` on the node's PATH.
Pure: argv and env only; plan.py makes ProcessSpecs of them.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from orchestra_ops.config.layout import Layout, Slot, layout
from orchestra_ops.config.model_spec import ModelSpec
from orchestra_ops.config.parallel import VLLM_DP_RPC_PORT as DEFAULT_RPC_PORT
from orchestra_ops.config.parallel import RaySettings, ray_ports
from orchestra_ops.config.placement import machine_name
from orchestra_ops.config.topology import Topology
from orchestra_ops.fleet.ray_gate import JOB_HEAD, gate_argv

# A one-node Ray cluster (a one-host model with `ray:`) stays on this host's loopback: Ray otherwise turns a
# node address of 127.0.0.1 into the machine's outward address (services.resolve_ip_for_localhost) unless it
# believes it cannot cluster, which a one-node cluster never needs to.
ONE_NODE_RAY = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}

HostsOf = Callable[[int], "tuple[str | None, str]"]  # host index -> (connect host, bind address)
BaseArgv = Callable[[str, int], "list[str]"]  # (bind, port) -> `vllm serve MODEL --host … --port … …`


@dataclass(frozen=True)
class RankProcess:
    """One process of a laid-out model: its slot, where it runs, its command."""

    slot: Slot
    machine: str  # the node of its host (`pair@1` for a node that spans hosts)
    host: str | None
    bind: str
    argv: list[str]
    env: dict[str, str]
    ranks: tuple[int, ...]  # DP ranks when vLLM runs several (internal/hybrid/external), else ()
    domain: str | None  # the model key when its processes step together
    gate: int = 0
    ports: tuple[int, ...] = ()  # every port it listens on besides its slot's (a Ray node's block)


def ray_command(vllm_command: Sequence[str]) -> str:
    """The engine's `ray`: beside a `…/bin/vllm`, else `ray` on PATH."""
    first = vllm_command[0]
    if "/" in first and posixpath.basename(first) == "vllm":
        return posixpath.join(posixpath.dirname(first), "ray")
    return "ray"


def rank_processes(topology: Topology, key: str, base_argv: BaseArgv, hosts_of: HostsOf) -> list[RankProcess]:
    """Every process of model `key`, in layout order."""
    model = topology.models[key]
    shape = layout(topology, key)
    in_job = topology.nodes[model.node].slurm is not None and shape.hosts > 1  # one sbatch job over N nodes
    if shape.ray and shape.hosts == 1:
        head_host = "127.0.0.1"
    elif in_job:
        head_host = JOB_HEAD  # the job's first node, known when it runs (backends/sbatch.py)
    else:
        head_host = hosts_of(0)[0] or "localhost"
    domain = key if shape.lockstep else None
    out = []
    for slot in shape.slots:
        host, bind = hosts_of(slot.host_index)
        machine = model.node if in_job else machine_name(model.node, slot.host_index, shape.hosts)
        env = dict(ONE_NODE_RAY) if shape.ray and shape.hosts == 1 else {}
        if slot.role != "server":
            address = head_host if shape.hosts == 1 else None if in_job else host or bind  # in a job: Ray's own
            argv = _ray_argv(topology, model, shape, slot, address, head_host)
            ports = tuple(ray_ports(model.ray or RaySettings(), slot.host_index, shape.hosts).all())
            out.append(RankProcess(slot, machine, host, bind, argv, env, (), domain, ports=ports))
            continue
        argv = base_argv(bind, slot.port) + _dp_flags(model, shape, slot, head_host)
        gate = 0
        if shape.ray:
            argv += ["--distributed-executor-backend", "ray"]
            settings = model.ray or RaySettings()
            timeout = topology.defaults.ready_timeout_s
            front = gate_argv(_ray_of(topology, model), shape.hosts, f"{head_host}:{settings.port}", timeout)
            argv, gate = front + argv, len(front)
        ranks = slot.dp_ranks if model.data_parallel.in_vllm else ()
        out.append(RankProcess(slot, machine, host, bind, argv, env, ranks, domain, gate))
    return out


def _ray_of(topology: Topology, model: ModelSpec) -> str:
    node = topology.nodes[model.node]
    return ray_command(model.vllm_command or node.vllm_command or topology.defaults.vllm_command)


def _dp_flags(model: ModelSpec, shape: Layout, slot: Slot, head: str) -> list[str]:
    settings = model.data_parallel
    flags: list[str] = []
    if settings.in_vllm and shape.dp > 1:
        flags += ["--data-parallel-size", str(shape.dp)]
        if settings.mode == "vllm-hybrid":
            flags += ["--data-parallel-size-local", str(len(slot.dp_ranks)),
                      "--data-parallel-start-rank", str(slot.dp_ranks[0])]
        elif settings.mode == "vllm-external":
            flags += ["--data-parallel-rank", str(slot.dp_ranks[0])]
        if settings.mode != "vllm-internal":
            flags += ["--data-parallel-address", head]
        flags += ["--data-parallel-rpc-port", str(settings.rpc_port or DEFAULT_RPC_PORT)]
        if settings.mode == "vllm-hybrid":
            flags.append("--data-parallel-hybrid-lb")
    if settings.expert_parallel:
        flags.append("--enable-expert-parallel")
    return flags


def _ray_argv(topology: Topology, model: ModelSpec, shape: Layout, slot: Slot, address: str | None,
              head: str) -> list[str]:
    """`ray start --block …` for one Ray node: every port it listens on set, no dashboard, no usage stats;
    its address given (None: Ray finds the node's own, as on the nodes of a slurm job)."""
    settings = model.ray or RaySettings()
    ports = ray_ports(settings, slot.host_index, shape.hosts)
    argv = [_ray_of(topology, model), "start", "--block", "--disable-usage-stats"]
    if address is not None:
        argv += ["--node-ip-address", address]
    if ports.gcs is not None:
        argv += ["--head", "--port", str(ports.gcs), "--ray-client-server-port", str(ports.client_server),
                 "--include-dashboard", "false"]
    else:
        argv += ["--address", f"{head}:{settings.port}"]
    argv += ["--node-manager-port", str(ports.node_manager), "--object-manager-port", str(ports.object_manager),
             "--metrics-export-port", str(ports.metrics_export),
             "--dashboard-agent-grpc-port", str(ports.dashboard_agent_grpc),
             "--dashboard-agent-listen-port", str(ports.dashboard_agent_listen),
             "--runtime-env-agent-port", str(ports.runtime_env_agent),
             "--min-worker-port", str(ports.min_worker), "--max-worker-port", str(ports.max_worker)]
    if model.gpus_per_replica > 0:
        argv += ["--num-gpus", str(slot.devices)]
    return argv
