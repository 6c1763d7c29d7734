"""Topology -> LaunchPlan: every process `ops up` would start, as plain data. Pure.

One command builder per engine: `vllm serve …` for vLLM replicas, `ops serve sim …` for the
simulated engine, `ops serve retrieval …` for retrieval services and `ops serve gateway …` for the
topology's gateway (started once the rest serves; it is no key of the endpoints file). The reproduce command of a
process is a shell line in which every value is quoted, so a model named `x; rm -rf ~` is one
argument and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from orchestra_ops.config.layout import uses_new_layout
from orchestra_ops.config.model_spec import ModelSpec, SimSettings
from orchestra_ops.config.placement import place_cpus, place_gpus, replica_name
from orchestra_ops.config.topology import LOCAL_HOSTS, RetrievalService, Topology
from orchestra_ops.core.paths import topology_dir
from orchestra_ops.fleet.lora_argv import lora_argv, lora_env
from orchestra_ops.fleet.parallel_plan import rank_processes
from orchestra_ops.fleet.process_spec import ProcessSpec


@dataclass(frozen=True)
class LaunchPlan:
    name: str
    backend: str
    processes: tuple[ProcessSpec, ...]
    state_dir: str
    log_dir: str

    @property
    def hosts_resolved(self) -> bool:
        """False while a slurm node's host is still unknown."""
        return all(spec.host is not None for spec in self.processes)

    def by_name(self, name: str) -> ProcessSpec:
        for spec in self.processes:
            if spec.name == name:
                return spec
        raise KeyError(name)

    def with_hosts(self, hosts: Mapping[str, str]) -> LaunchPlan:
        """The plan once slurm told us each allocated node's host (node name -> host)."""
        processes = tuple(
            replace(spec, host=hosts.get(spec.node, spec.host)) if spec.host is None else spec
            for spec in self.processes
        )
        return replace(self, processes=processes)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "backend": self.backend,
                "processes": [spec.to_json() for spec in self.processes]}


def plan(topology: Topology, *, state_dir: str | Path | None = None) -> LaunchPlan:
    """Every process of `topology`, in declaration order (models, then services).

    `state_dir` is where state and default logs live (default `.ops/<name>`, see paths.py).
    """
    base = Path(state_dir) if state_dir is not None else topology_dir(topology.name)
    log_dir = topology.defaults.log_dir or str(base / "logs")
    placement, problems = place_gpus(topology)
    if problems:  # load_topology refuses these; a hand-built Topology may still carry them
        raise ValueError(f"topology {topology.name!r} has placement problems: {problems}")
    cpu_binds = place_cpus(topology)[0]
    processes: list[ProcessSpec] = []
    for key, model in topology.models.items():
        if model.engine == "vllm" and uses_new_layout(model):
            processes += _parallel_processes(topology, key, model, placement, cpu_binds, log_dir)
            continue
        for index in range(model.replicas):
            name = replica_name(key, index)
            spec = _model_process(topology, key, model, index, placement[name], log_dir)
            if name in cpu_binds:
                spec = replace(spec, env={**spec.env, "VLLM_CPU_OMP_THREADS_BIND": cpu_binds[name]})
            processes.append(spec)
    for key, service in topology.services.items():
        index_dir = service.index_dir or str(base / "index" / key)  # see indexes.py
        processes.append(_retrieval_process(topology, key, service, placement.get(key, ()), log_dir, index_dir))
    if topology.gateway is not None:
        processes.append(_gateway_process(topology, log_dir))
    return LaunchPlan(name=topology.name, backend=topology.backend, processes=tuple(processes),
                      state_dir=str(base), log_dir=log_dir)


def _hosts(topology: Topology, node_name: str, host_index: int = 0) -> tuple[str | None, str]:
    """(connect host, bind address) of a node (of its `host_index`-th host): this machine's nodes bind loopback
    unless told otherwise, other nodes 0.0.0.0 unless `bind` says which address (see topology.Node). On a
    `hosts:` node `bind` is this machine's host's address; another host binds its own address when it is a
    loopback one (two hosts on one machine keep apart), else 0.0.0.0."""
    node = topology.nodes[node_name]
    if node.hosts:
        host = node.hosts[host_index]
        if host in LOCAL_HOSTS:
            loopback = "::1" if host == "::1" else "127.0.0.1"
            bind = node.bind or loopback
            return (loopback if bind in ("0.0.0.0", "::") else bind), bind
        return host, host if host.startswith("127.") else "0.0.0.0"
    if node.host is None:
        return None, node.bind or "0.0.0.0"
    if node.host in LOCAL_HOSTS:
        loopback = "::1" if node.host == "::1" else "127.0.0.1"
        bind = node.bind or loopback
        return (loopback if bind in ("0.0.0.0", "::") else bind), bind
    return node.host, node.bind or "0.0.0.0"


def _log_path(log_dir: str, name: str) -> str:
    return f"{log_dir.rstrip('/')}/{name.replace('/', '-')}.log"


def _parallel_processes(topology: Topology, key: str, model: ModelSpec, placement: Mapping[str, tuple[int, ...]],
                        cpu_binds: Mapping[str, str], log_dir: str) -> list[ProcessSpec]:
    """The processes of a model laid out by config/layout.py (fleet/parallel_plan.py builds their commands)."""
    specs = []
    for item in rank_processes(topology, key, lambda bind, port: vllm_argv(topology, model, bind, port),
                               lambda index: _hosts(topology, model.node, index)):
        slot = item.slot
        gpus = placement.get(slot.name, ())
        env = {"CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus)), "PYTHONUNBUFFERED": "1", **item.env}
        if slot.name in cpu_binds:
            env["VLLM_CPU_OMP_THREADS_BIND"] = cpu_binds[slot.name]
        if slot.role == "server":
            cache = f"{topology.defaults.vllm_cache_root.rstrip('/')}/{topology.name}/{slot.name.replace('/', '-')}"
            env["VLLM_CACHE_ROOT"] = cache
            # its ranks compile CPU kernels (torch inductor) into a cache of this server's own: a server killed
            # mid-compile leaves a torn kernel there, never in the machine's shared /tmp/torchinductor_<user>
            env["TORCHINDUCTOR_CACHE_DIR"] = f"{cache}/inductor"
            env.update(lora_env(model))
            env.update(model.env)
        specs.append(ProcessSpec(
            name=slot.name, group=key, kind="vllm" if slot.role == "server" else "ray", node=item.machine,
            host=item.host, bind_host=item.bind, port=slot.port, gpus=gpus, argv=tuple(item.argv), env=env,
            log=_log_path(log_dir, slot.name), served_model_name=model.served_name if slot.serves else None,
            ulimit_nofile=topology.defaults.ulimit_nofile,
            endpoint_key=model.served_name if slot.serves else f"{key} ({slot.role})",
            adapters=tuple(model.lora_modules) if slot.serves else (), role=slot.role, ranks=item.ranks,
            stages=slot.stages if model.pipeline_parallel > 1 else (), domain=item.domain, gate=item.gate,
            host_index=slot.host_index if item.machine == model.node else 0,
            more_ports=tuple(p for p in item.ports if p != slot.port)))
    return specs


def _model_process(topology: Topology, key: str, model: ModelSpec, index: int, gpus: tuple[int, ...],
                   log_dir: str) -> ProcessSpec:
    host, bind = _hosts(topology, model.node)
    port = model.port + index
    name = replica_name(key, index)
    env = {"CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus)), "PYTHONUNBUFFERED": "1"}
    if model.engine == "vllm":
        cache = f"{topology.defaults.vllm_cache_root.rstrip('/')}/{topology.name}/{key}-{index}"
        env["VLLM_CACHE_ROOT"] = cache
        argv = vllm_argv(topology, model, bind, port)
    else:
        argv = sim_argv(topology, model, bind, port, index)
    env.update(lora_env(model))
    env.update(model.env)
    return ProcessSpec(
        name=name, group=key, kind=model.engine, node=model.node, host=host, bind_host=bind, port=port,
        gpus=gpus, argv=tuple(argv), env=env, log=_log_path(log_dir, name),
        served_model_name=model.served_name, ulimit_nofile=topology.defaults.ulimit_nofile,
        endpoint_key=model.served_name, adapters=tuple(model.lora_modules),
    )


def vllm_argv(topology: Topology, model: ModelSpec, bind: str, port: int) -> list[str]:
    """`vllm serve MODEL --host H --port P [--served-model-name …] [tool flags] [memory] [len] [tp] [lora] ARGS`."""
    argv = [*vllm_command(topology, model), "serve", model.model, "--host", bind, "--port", str(port)]
    if model.served_model_name:
        argv += ["--served-model-name", model.served_model_name]
    if model.tool_parser:
        argv += ["--enable-auto-tool-choice", "--tool-call-parser", model.tool_parser]
    if model.reasoning_parser:
        argv += ["--reasoning-parser", model.reasoning_parser]
    if model.gpu_memory_utilization is not None:
        argv += ["--gpu-memory-utilization", _num(model.gpu_memory_utilization)]
    if model.max_model_len is not None:
        argv += ["--max-model-len", str(model.max_model_len)]
    tp = model.tensor_parallel or model.gpus_per_replica
    if tp > 1:
        argv += ["--tensor-parallel-size", str(tp)]
    if model.pipeline_parallel > 1:
        argv += ["--pipeline-parallel-size", str(model.pipeline_parallel)]
    argv += lora_argv(model)
    return argv + list(model.engine_args)


def vllm_command(topology: Topology, model: ModelSpec) -> list[str]:
    """The vLLM executable of a model: its own `vllm_command`, else its node's, else `defaults.vllm_command`."""
    node = topology.nodes.get(model.node)
    node_command = node.vllm_command if node is not None else None
    return list(model.vllm_command or node_command or topology.defaults.vllm_command)


def sim_argv(topology: Topology, model: ModelSpec, bind: str, port: int, index: int) -> list[str]:
    """`ops serve sim --host H --port P --model NAME …`: the simulated engine, same wire as vLLM.

    Each replica gets the seed `sim.seed + index`, so replicas do not fail in lockstep.
    """
    sim = model.sim or SimSettings()
    argv = [*topology.defaults.ops_command, "serve", "sim", "--host", bind, "--port", str(port),
            "--model", model.served_name]
    if model.max_model_len is not None:
        argv += ["--max-model-len", str(model.max_model_len)]
    argv += ["--latency-ms", _num(sim.latency_ms),
             "--prefill-ms-per-token", _num(sim.prefill_ms_per_token),
             "--decode-ms-per-token", _num(sim.decode_ms_per_token),
             "--jitter", _num(sim.jitter),
             "--startup-delay-s", _num(sim.startup_delay_s)]
    if sim.decode_slowdown:
        argv += ["--decode-slowdown", _num(sim.decode_slowdown)]
    if sim.prefix_cache_tokens != SimSettings().prefix_cache_tokens:
        argv += ["--prefix-cache-tokens", str(sim.prefix_cache_tokens)]
    if sim.fail:
        argv += ["--fail", sim.fail.replace(" ", "")]
    if sim.malformed_rate:
        argv += ["--malformed-rate", _num(sim.malformed_rate)]
    if sim.hang_rate:
        argv += ["--hang-rate", _num(sim.hang_rate)]
    if sim.crash_after is not None:
        argv += ["--crash-after", str(sim.crash_after)]
    argv += lora_argv(model, repeat_modules_flag=True)
    argv += ["--seed", str(sim.seed + index)]
    return argv + list(model.engine_args)


def retrieval_argv(topology: Topology, service: RetrievalService, bind: str, index_dir: str | None = None) -> list[str]:
    """`ops serve retrieval --index-dir DIR --host H --port P …` (DIR: `index_dir`, else the service's)."""
    argv = [*topology.defaults.ops_command, "serve", "retrieval", "--index-dir", index_dir or service.index_dir or "",
            "--host", bind, "--port", str(service.port),
            "--device", "cpu" if service.gpu is None else "cuda",
            "--max-batch-size", str(service.max_batch_size),
            "--max-wait-ms", _num(service.max_wait_ms),
            "--max-queue", str(service.max_queue),
            "--batching", "on" if service.batching else "off"]
    if service.encoder:
        argv += ["--encoder", service.encoder]
    if service.examples:
        argv += ["--examples", service.examples]
    return argv


def _retrieval_process(topology: Topology, key: str, service: RetrievalService, gpus: tuple[int, ...],
                       log_dir: str, index_dir: str) -> ProcessSpec:
    host, bind = _hosts(topology, service.node)
    env = {"CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus)), "PYTHONUNBUFFERED": "1", **service.env}
    return ProcessSpec(
        name=key, group=key, kind="retrieval", node=service.node, host=host, bind_host=bind,
        port=service.port, gpus=gpus, argv=tuple(retrieval_argv(topology, service, bind, index_dir)), env=env,
        log=_log_path(log_dir, key), served_model_name=None,
        ulimit_nofile=topology.defaults.ulimit_nofile, endpoint_key=key,
    )


GATEWAY = "gateway"  # the gateway's process name (and kind)


def gateway_argv(topology: Topology) -> list[str]:
    """`ops serve gateway --topology NAME --host H --port P …`: NAME is up by the time it starts."""
    gateway = topology.gateway
    assert gateway is not None
    argv = [*topology.defaults.ops_command, "serve", "gateway", "--topology", topology.name, "--host", gateway.bind,
            "--port", str(gateway.port)]
    if gateway.api_key_env:
        argv += ["--api-key-env", gateway.api_key_env]
    if gateway.cache:
        argv += ["--cache"]
    return argv


def _gateway_process(topology: Topology, log_dir: str) -> ProcessSpec:
    gateway = topology.gateway
    node = topology.gateway_node
    assert gateway is not None and node is not None  # load_topology refuses a gateway with no node here
    host = "127.0.0.1" if gateway.bind in ("0.0.0.0", "::", "localhost") else gateway.bind
    return ProcessSpec(
        name=GATEWAY, group=GATEWAY, kind="gateway", node=node, host=host, bind_host=gateway.bind, port=gateway.port,
        gpus=(), argv=tuple(gateway_argv(topology)), env={"PYTHONUNBUFFERED": "1"}, log=_log_path(log_dir, GATEWAY),
        served_model_name=None, ulimit_nofile=topology.defaults.ulimit_nofile, endpoint_key=GATEWAY,
    )


def _num(value: float) -> str:
    """Numbers as a person writes them: 0.85, 5, 0.5 (no 5.0)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))
