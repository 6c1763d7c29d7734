"""Cross-field checks of a topology that the schema alone cannot express.

Each check returns `(path, message)` pairs; `load_topology` turns them into `FILE:LINE: path: message`.
The tool-parser rules are data (`KNOWN_TOOL_PARSERS`, `PARSER_FAMILIES`), so adding a family is one line.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from typing import Any

from orchestra_ops.config.layout import shape_problems
from orchestra_ops.config.lora_checks import check_lora
from orchestra_ops.config.placement import place_cpus, place_gpus
from orchestra_ops.config.port_checks import port_problems
from orchestra_ops.config.topology import ENV_NAME, LOCAL_HOSTS, Topology

Problem = tuple[tuple[Any, ...], str]

# Tool-call parsers vLLM ships (`vllm serve --tool-call-parser`): the registry of vLLM 0.32/0.33
# (vllm/tool_parsers/__init__.py; `minimax` is gone, only minimax_m2/m3). The node's own vLLM is the final
# word: `ops up` and `ops plan --check` have it parse the exact argv (fleet/argv_check.py).
KNOWN_TOOL_PARSERS: frozenset[str] = frozenset({
    "apertus", "cohere_command3", "cohere_command4", "deepseek_v3", "deepseek_v31", "deepseek_v32",
    "deepseek_v4", "deepseek_v41", "dots", "ernie45", "functiongemma", "gemma4", "gigachat3", "glm45", "glm47",
    "granite", "granite-20b-fc", "granite4", "hermes", "hf", "hunyuan_a13b", "hy_v3", "hy_v4", "inkling",
    "internlm", "jamba", "k2_horizon", "kimi_k2", "kimi_k3", "lfm2", "ling3", "llama3_json", "llama4_json",
    "llama4_pythonic", "longcat", "mimo", "minicpm5", "minimax_m2", "minimax_m3", "mistral", "muse_glimmer",
    "olmo3", "openai", "phi4_mini_json", "plamo3", "poolside_v1", "pythonic", "qwen3_coder", "qwen3_json",
    "qwen3_xml", "seed_oss", "solar_open2", "step3", "step3p5", "xlam",
})
# Reasoning parsers (`vllm serve --reasoning-parser`), vllm/reasoning of the same versions.
KNOWN_REASONING_PARSERS: frozenset[str] = frozenset({
    "cohere_command3", "cohere_command4", "deepseek_r1", "deepseek_v3", "deepseek_v4", "deepseek_v41", "ernie45",
    "gemma4", "glm45", "glm47", "granite", "granite_thinking_parser", "hf", "holo2", "hunyuan_a13b", "hy_v3",
    "hy_v4", "inkling", "k2_horizon", "kimi_k2", "kimi_k3", "ling3", "mimo", "minicpmv", "minimax_m2",
    "minimax_m2_append_think", "minimax_m3", "mistral", "muse_glimmer", "nemotron_v3", "olmo3", "openai_gptoss",
    "plamo3", "poolside_v1", "qwen3", "seed_oss", "step3", "step3p5",
})

# (family, regex on the model name or served name, parsers that can parse its tool calls; first is
# the one to suggest). The first matching family wins; a model no family matches may use any parser.
PARSER_FAMILIES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("gpt-oss", r"gpt-oss", ("openai",)),
    ("Qwen3-Coder", r"qwen3-coder", ("qwen3_coder", "qwen3_xml")),
    ("Qwen", r"qwen(2\.5|3)", ("hermes",)),
    ("Llama 3", r"llama-?3", ("llama3_json", "pythonic")),
    ("Llama 4", r"llama-?4", ("llama4_pythonic", "llama4_json", "pythonic")),
    ("Mistral", r"mistral|mixtral|ministral", ("mistral",)),
    ("DeepSeek-V3", r"deepseek-v3", ("deepseek_v31", "deepseek_v3")),
    ("Kimi K2", r"kimi-k2", ("kimi_k2",)),
)

# vLLM flags the topology sets from its own fields; repeating them in engine_args is an error.
MANAGED_FLAGS: dict[str, str] = {
    "--host": "the node's host",
    "--port": "port",
    "--served-model-name": "served_model_name",
    "--tool-call-parser": "tool_parser",
    "--reasoning-parser": "reasoning_parser",
    "--enable-auto-tool-choice": "tool_parser",
    "--gpu-memory-utilization": "gpu_memory_utilization",
    "--max-model-len": "max_model_len",
    "--tensor-parallel-size": "tensor_parallel (or gpus_per_replica)",
    "-tp": "tensor_parallel (or gpus_per_replica)",
    "--pipeline-parallel-size": "pipeline_parallel",
    "-pp": "pipeline_parallel",
    "--data-parallel-size": "replicas with data_parallel.mode",
    "-dp": "replicas with data_parallel.mode",
    "--data-parallel-rank": "data_parallel.mode: vllm-external",
    "--data-parallel-size-local": "data_parallel.mode",
    "--data-parallel-start-rank": "data_parallel.mode",
    "--data-parallel-address": "the node's hosts",
    "--data-parallel-rpc-port": "data_parallel.rpc_port",
    "--data-parallel-hybrid-lb": "data_parallel.mode: vllm-hybrid",
    "--data-parallel-external-lb": "data_parallel.mode: vllm-external",
    "--enable-expert-parallel": "data_parallel.expert_parallel",
    "--distributed-executor-backend": "the node's hosts (a model across hosts runs through Ray)",
}
# Variables that hold secrets: state.json and logs record a process's env, so a secret never goes
# into the topology; export it where `ops up` runs and the processes inherit it.
SECRET_ENV = re.compile(r"(^|_)(API_KEY|TOKEN|SECRET|PASSWORD)$", re.IGNORECASE)
MANAGED_ENV: dict[str, str] = {
    "CUDA_VISIBLE_DEVICES": "gpus (placement sets it per replica)",
    "VLLM_CACHE_ROOT": "defaults.vllm_cache_root (one per replica)",
    "TORCHINDUCTOR_CACHE_DIR": "defaults.vllm_cache_root (a model laid out over ranks compiles into its own)",
    "VLLM_CPU_OMP_THREADS_BIND": "cpus_per_replica (each CPU replica gets its own cores)",
}


def check_topology(topology: Topology) -> list[Problem]:
    problems: list[Problem] = []
    for check in (_nodes_exist, _engines, _tool_parsers, _reasoning_parsers, _engine_args, _envs, port_problems, _roles,
                  _aliases, _names, _node_backends, _gateway, check_lora, shape_problems):
        problems.extend(check(topology))
    problems.extend(place_gpus(topology)[1])  # models on unknown nodes are skipped there
    problems.extend(place_cpus(topology)[1])
    return problems


def parser_family(model_name: str) -> tuple[str, tuple[str, ...]] | None:
    """The family a model name belongs to and the parsers that fit it, or None when unknown."""
    lowered = model_name.lower()
    for family, pattern, parsers in PARSER_FAMILIES:
        if re.search(pattern, lowered):
            return family, parsers
    return None


def _nodes_exist(topology: Topology) -> Iterator[Problem]:
    known = ", ".join(topology.nodes)
    for section, items in (("models", topology.models), ("services", topology.services)):
        for key, item in items.items():
            if item.node not in topology.nodes:
                yield (section, key, "node"), f"'{item.node}' is not a declared node (nodes: {known})"
    for key, service in topology.services.items():
        node = topology.nodes.get(service.node)
        if node is not None and node.hosts:
            yield ("services", key, "node"), (f"node '{service.node}' spans {len(node.hosts)} hosts; a service runs "
                                              "on one host (a node with host:)")


def _engines(topology: Topology) -> Iterator[Problem]:
    for key, model in topology.models.items():
        node = topology.nodes.get(model.node)
        if model.engine == "vllm" and model.gpus_per_replica == 0 and node is not None and node.gpu_count > 0:
            yield ("models", key, "gpus_per_replica"), (
                f"0 GPUs per replica on node '{model.node}', which has {node.gpu_count} GPUs: give each replica a "
                "GPU, or run the CPU build of vLLM on a node with gpus: 0 (or engine: sim)")
        if model.engine == "vllm" and model.sim is not None:
            yield ("models", key, "sim"), "sim settings apply only to engine: sim"
        if model.engine != "vllm":
            for field in ("vllm_command", "reasoning_parser", "cpus_per_replica"):
                if getattr(model, field) is not None:
                    yield ("models", key, field), "applies only to engine: vllm"
        elif model.cpus_per_replica is not None and model.gpus_per_replica > 0:
            yield ("models", key, "cpus_per_replica"), "applies only to the CPU build of vLLM (gpus_per_replica: 0)"


def _tool_parsers(topology: Topology) -> Iterator[Problem]:
    for key, model in topology.models.items():
        parser = model.tool_parser
        if parser is None:
            continue
        path = ("models", key, "tool_parser")
        if parser not in KNOWN_TOOL_PARSERS:
            close = difflib.get_close_matches(parser, sorted(KNOWN_TOOL_PARSERS), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f"; known: {', '.join(sorted(KNOWN_TOOL_PARSERS))}"
            yield path, f"'{parser}' is not a vLLM tool-call parser{hint}"
            continue
        family = parser_family(model.model) or parser_family(model.served_name)
        if family is not None and parser not in family[1]:
            yield path, f"'{parser}' cannot parse {family[0]} tool calls; use '{family[1][0]}'"


def _reasoning_parsers(topology: Topology) -> Iterator[Problem]:
    for key, model in topology.models.items():
        parser = model.reasoning_parser
        if parser is not None and parser not in KNOWN_REASONING_PARSERS:
            close = difflib.get_close_matches(parser, sorted(KNOWN_REASONING_PARSERS), n=1)
            hint = (f"; did you mean '{close[0]}'?" if close
                    else f"; known: {', '.join(sorted(KNOWN_REASONING_PARSERS))}")
            yield ("models", key, "reasoning_parser"), f"'{parser}' is not a vLLM reasoning parser{hint}"


def _engine_args(topology: Topology) -> Iterator[Problem]:
    for key, model in topology.models.items():
        for index, arg in enumerate(model.engine_args):
            flag = arg.split("=", 1)[0]
            if flag in MANAGED_FLAGS:
                yield ("models", key, "engine_args", index), (
                    f"'{flag}' is set from the topology; use {MANAGED_FLAGS[flag]} instead")


def _envs(topology: Topology) -> Iterator[Problem]:
    sections: list[tuple[str, dict[str, Any]]] = [("models", topology.models), ("services", topology.services)]
    for section, items in sections:
        for key, item in items.items():
            for name in item.env:
                if not ENV_NAME.match(str(name)):
                    yield (section, key, "env", name), f"'{name}' is not an environment variable name"
                elif name in MANAGED_ENV:
                    yield (section, key, "env", name), f"set by orchestra-ops; use {MANAGED_ENV[name]}"
                elif SECRET_ENV.search(str(name)):
                    yield (section, key, "env", name), (
                        "never put a secret in the topology; export it in the shell that runs `ops up` "
                        "(processes inherit it)")


def _roles(topology: Topology) -> Iterator[Problem]:
    targets = {**{k: "model" for k in topology.models}, **{k: "service" for k in topology.services},
               **{k: "provider" for k in topology.providers},
               **{name: "adapter" for model in topology.models.values() for name in model.lora_modules}}
    for role, target in topology.roles.items():
        if target not in targets:
            known = ", ".join(targets) or "nothing is declared"
            yield ("roles", role), f"'{target}' names no model, service or provider ({known})"


def _aliases(topology: Topology) -> Iterator[Problem]:
    """A tool alias names a role or a model/provider (never a service); a role it names must exist."""
    chat = set(topology.models) | set(topology.providers)
    for alias, target in topology.aliases.items():
        if target in topology.services:
            yield ("aliases", alias), f"'{target}' is a service; an alias names a role or a model that answers chats"
        elif target in topology.roles:
            if topology.roles[target] in topology.services:
                yield ("aliases", alias), f"role '{target}' names the service '{topology.roles[target]}', not a model"
        elif target not in chat:
            known = ", ".join(sorted(set(topology.roles) | chat)) or "nothing is declared"
            yield ("aliases", alias), f"'{target}' names no role, model or provider ({known})"


def _names(topology: Topology) -> Iterator[Problem]:
    """Keys of the endpoints file must not collide: a served model name vs a service name."""
    for key, model in topology.models.items():
        if model.served_name in topology.services:
            yield ("models", key, "served_model_name"), (
                f"'{model.served_name}' is also a service name; the endpoints file needs distinct keys")
    clash = set(topology.models) & (set(topology.services) | set(topology.providers))
    clash |= set(topology.services) & set(topology.providers)
    for name in sorted(clash):
        section = "services" if name in topology.services else "providers"
        yield (section, name), f"'{name}' is declared twice (models, services and providers share one namespace)"


def _node_backends(topology: Topology) -> Iterator[Problem]:
    """Each node's backend follows from the node (see topology.Node); these combinations make no sense."""
    for name, node in topology.nodes.items():
        if topology.backend == "slurm" and node.host is not None:
            yield ("nodes", name, "host"), (
                "with backend: slurm every node is a slurm node; give this one 'slurm:' settings, or set "
                "backend: local or tmux (nodes with a host on other machines are reached over ssh)")
        elif node.ssh is not None and node.is_local:
            yield ("nodes", name, "ssh"), f"'{node.host}' is this machine; 'ssh' applies to nodes on other hosts"


def _gateway(topology: Topology) -> Iterator[Problem]:
    """The gateway runs on this machine, and never hands provider keys to an open port."""
    gateway = topology.gateway
    if gateway is None:
        return
    node_name = topology.gateway_node
    if node_name is None:
        yield ("gateway",), ("no node of the topology is on this machine (host: localhost); the gateway runs "
                             "where `ops up` runs: declare one, or name it with gateway.node")
    elif node_name not in topology.nodes:
        yield ("gateway", "node"), f"'{node_name}' is not a declared node (nodes: {', '.join(topology.nodes)})"
    elif topology.nodes[node_name].host not in LOCAL_HOSTS:
        yield ("gateway", "node"), (f"'{node_name}' is not on this machine (host {topology.nodes[node_name].host}); "
                                    "the gateway runs where `ops up` runs")
    keyed = sorted(k for k, p in topology.providers.items() if p.api_key_env)
    loopback = gateway.bind in ("localhost", "::1") or gateway.bind.startswith("127.")
    if keyed and not loopback and gateway.api_key_env is None:
        yield ("gateway", "bind"), (f"'{gateway.bind}' is not loopback and the gateway injects the keys of "
                                    f"{', '.join(keyed)}: set gateway.api_key_env (clients then send a bearer "
                                    "token), or bind 127.0.0.1")
