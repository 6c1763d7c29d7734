"""The topology file's schema: one YAML that declares nodes, models, services, providers and roles.

Pydantic models with `extra="forbid"` everywhere; `config/loader.py` reads a file into them (keeping
each node's line) and runs the cross-field checks of `config/checks.py`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from orchestra_ops.config.nodes import LOCAL_HOSTS as LOCAL_HOSTS  # re-exported: nodes are part of the schema
from orchestra_ops.config.nodes import Node as Node
from orchestra_ops.config.nodes import Port as Port
from orchestra_ops.config.nodes import SlurmSettings as SlurmSettings
from orchestra_ops.config.nodes import SshSettings as SshSettings
from orchestra_ops.config.parallel import DataParallel, RaySettings

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TOPOLOGY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
KEY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Defaults(Strict):
    ulimit_nofile: int = Field(65536, ge=1024)
    log_dir: str | None = None  # default: <OPS_HOME>/<name>/logs
    ready_timeout_s: float = Field(900, gt=0)
    request_timeout_s: float = Field(600, gt=0)
    vllm_cache_root: str = "/tmp/orchestra-ops/vllm-cache"
    vllm_command: list[str] = Field(default_factory=lambda: ["vllm"], min_length=1)  # a node's or model's wins
    ops_command: list[str] = Field(default_factory=lambda: ["ops"], min_length=1)


class SimSettings(Strict):
    """How the simulated engine behaves (`engine: sim`); see `ops serve sim --help`."""

    latency_ms: float = Field(20.0, ge=0)
    prefill_ms_per_token: float = Field(0.0, ge=0)  # per prompt token its prefix cache did not hold
    decode_ms_per_token: float = Field(0.0, ge=0)
    decode_slowdown: float = Field(0.0, ge=0)  # decode x (1 + this * (requests in flight - 1))
    prefix_cache_tokens: int = Field(65536, ge=0)  # the replica's prefix-cache capacity
    jitter: float = Field(0.0, ge=0, le=1)
    startup_delay_s: float = Field(0.0, ge=0)
    fail: str | None = None  # "500:0.05,429:0.02"
    malformed_rate: float = Field(0.0, ge=0, le=1)
    hang_rate: float = Field(0.0, ge=0, le=1)
    crash_after: int | None = Field(None, ge=1)
    seed: int = 0

    @field_validator("fail")
    @classmethod
    def _fail_spec(cls, value: str | None) -> str | None:
        if value is None:
            return value
        for part in value.split(","):
            match = re.fullmatch(r"\s*(\d{3})\s*:\s*([0-9.]+)\s*", part)
            if not match or not 0 <= float(match.group(2)) <= 1:
                raise ValueError(f"'{part.strip()}' is not STATUS:RATE (e.g. 500:0.05)")
        return value


class Pricing(Strict):
    """What a call costs, in USD per million tokens (client/pricing.py); `--max-cost` and the usage tables read it."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)

class ModelRouting(Strict):
    """`routing:` how the client spreads a model's calls over its replicas (client/affinity.py).

    `affinity: session` sends every call of one session (an agent task, a tau2 side, a HealthBench
    example) to one replica, so vLLM's prefix cache holds its history, under a load bound of
    ceil(load_factor * mean) calls in flight per replica; `none` sends each call to the least loaded.
    """

    affinity: Literal["session", "none"] = "session"
    load_factor: float = Field(1.25, ge=1.0, allow_inf_nan=False)


class ModelSpec(Strict):
    model: str = Field(min_length=1)
    engine: Literal["vllm", "sim"] = "vllm"
    node: str
    replicas: int = Field(1, ge=1, le=1024)
    gpus_per_replica: int = Field(1, ge=0)
    gpus: list[Annotated[int, Field(ge=0)]] | None = None  # explicit GPU indices, in replica order
    port: Port
    served_model_name: str | None = None
    tool_parser: str | None = None
    reasoning_parser: str | None = None  # vLLM's --reasoning-parser (reasoning goes to message.reasoning)
    vllm_command: list[str] | None = Field(None, min_length=1)  # default: the node's, then defaults.vllm_command
    cpus_per_replica: int | None = Field(None, ge=1)  # the CPU build of vLLM (gpus_per_replica: 0): cores each
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    max_model_len: int | None = Field(None, ge=1)
    request_defaults: dict[str, Any] = Field(default_factory=dict)
    request_timeout_s: float | None = Field(None, gt=0)  # per call to this model; default: defaults.request_timeout_s
    tokenizer: str | None = None  # "estimate", or a tokenizer dir / tokenizer.json for context budgets
    engine_args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    sim: SimSettings | None = None
    routing: ModelRouting = Field(default_factory=ModelRouting)
    # LoRA adapters (orchestra_ops/lora): name -> adapter directory (relative: to where `ops` runs)
    lora_modules: dict[str, str] = Field(default_factory=dict)
    max_lora_rank: int | None = Field(None, ge=1)  # vLLM's --max-lora-rank (its default: 16)
    max_loras: int | None = Field(None, ge=1)  # adapters in one batch (vLLM's --max-loras, default 1)
    runtime_lora: bool = False  # `ops lora load/unload` (sets VLLM_ALLOW_RUNTIME_LORA_UPDATING)
    pricing: Pricing | None = None  # USD per million tokens (a self-hosted model's own accounting; adapters share it)
    # Bigger than one GPU or host, vLLM's own data parallelism (config/parallel.py): `replicas` is the DP size
    tensor_parallel: int | None = Field(None, ge=1)  # default: gpus_per_replica (on a CPU node: ranks of 1 core)
    pipeline_parallel: int = Field(1, ge=1)  # stages; across the hosts of a `hosts:` node through Ray
    data_parallel: DataParallel = Field(default_factory=DataParallel)
    ray: RaySettings | None = None  # its Ray cluster's ports (stages across hosts; on one host: use Ray there)

    @property
    def served_name(self) -> str:
        return self.served_model_name or self.model

    @property
    def lora_enabled(self) -> bool:
        return bool(self.lora_modules) or self.runtime_lora

    @property
    def gpu_count(self) -> int:
        return self.replicas * self.gpus_per_replica


class RetrievalService(Strict):
    kind: Literal["retrieval"]
    node: str
    port: Port
    gpu: int | None = Field(None, ge=0)  # None: the encoder runs on the CPU
    index_dir: str | None = None  # default: <state dir>/index/<service> (indexes.py); relative: to where ops runs
    corpus: str | None = None  # a JSONL (id, content): a missing index is built from it at `ops up` (indexes.py)
    encoder: str | None = None
    max_batch_size: int = Field(64, ge=1)
    max_wait_ms: float = Field(5.0, ge=0)
    max_queue: int = Field(4096, ge=1)
    batching: bool = True
    examples: str | None = None
    env: dict[str, str] = Field(default_factory=dict)


class Provider(Strict):
    """An external OpenAI-compatible API. The key is read from `api_key_env` at call time."""

    kind: Literal["openai"] = "openai"
    model: str
    base_url: str
    api_key_env: str | None = None
    max_concurrency: int = Field(32, ge=1)
    request_defaults: dict[str, Any] = Field(default_factory=dict)
    request_timeout_s: float | None = Field(None, gt=0)  # per call; default: defaults.request_timeout_s
    pricing: Pricing | None = None  # USD per million tokens

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not ENV_NAME.match(value):
            raise ValueError(f"'{value}' is not an environment variable name (the key itself never goes here)")
        return value


class GatewaySettings(Strict):
    """`gateway:` one OpenAI URL over the fleet: `ops up` starts `ops serve gateway` on a node of this
    machine once every model serves, and `ops down` stops it (orchestra_ops/gateway)."""

    port: Port
    bind: str = "127.0.0.1"  # anything but loopback needs api_key_env when a provider's key would be injected
    node: str | None = None  # a node on this machine (default: the first one the topology declares)
    api_key_env: str | None = None  # clients send `Authorization: Bearer $VAR`
    cache: bool = False  # answer repeated temperature-0 requests from the response cache

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not ENV_NAME.match(value):
            raise ValueError(f"'{value}' is not an environment variable name (the token itself never goes here)")
        return value


class EvalSettings(Strict):
    """`eval:` how `ops eval --detach slurm` runs the eval itself: an sbatch job of its own, CPU only."""

    slurm: SlurmSettings = Field(default_factory=SlurmSettings)

    @field_validator("slurm")
    @classmethod
    def _cpu_only(cls, value: SlurmSettings) -> SlurmSettings:
        if value.gpus:
            raise ValueError(f"gpus: {value.gpus}: the eval job is CPU only (the fleet's nodes have the GPUs)")
        return value


class Topology(Strict):
    name: str
    # how nodes on this machine run their processes (local | tmux); slurm nodes and nodes on other
    # hosts choose their own backend (see Node). `slurm` says every node is a slurm node.
    backend: Literal["local", "tmux", "slurm"] = "local"
    defaults: Defaults = Field(default_factory=Defaults)
    nodes: dict[str, Node] = Field(min_length=1)
    models: dict[str, ModelSpec] = Field(default_factory=dict)
    services: dict[str, RetrievalService] = Field(default_factory=dict)
    providers: dict[str, Provider] = Field(default_factory=dict)
    roles: dict[str, str] = Field(default_factory=dict)
    aliases: dict[str, str] = Field(default_factory=dict)  # tool alias (search-1, …) -> role or model/provider key
    eval: EvalSettings | None = None  # the detached eval's own sbatch job (detach.py)
    gateway: GatewaySettings | None = None  # `ops serve gateway` started and stopped with the fleet

    @property
    def gateway_node(self) -> str | None:
        """The node the gateway runs on: `gateway.node`, else the first node on this machine (None: none)."""
        if self.gateway is None:
            return None
        if self.gateway.node is not None:
            return self.gateway.node
        return next((name for name, node in self.nodes.items() if node.host in LOCAL_HOSTS), None)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not TOPOLOGY_NAME.match(value):
            raise ValueError(f"'{value}' must be letters, digits, '.', '_' or '-' (it names a directory)")
        return value

    @field_validator("nodes", "models", "services", "providers", "aliases")
    @classmethod
    def _keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            if not KEY_NAME.match(str(key)):
                raise ValueError(f"'{key}' must be letters, digits, '.', '_' or '-'")
        return value
