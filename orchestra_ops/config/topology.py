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
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class Defaults(Strict):
    ulimit_nofile: int = Field(65536, ge=1024)
    """`ulimit -n` for every process ops starts (capped at the hard limit, with a warning)."""
    log_dir: str | None = None
    """Where process logs go (default: `$OPS_HOME/<name>/logs`)."""
    ready_timeout_s: float = Field(900, gt=0)
    """Seconds `ops up` waits for every process to serve."""
    request_timeout_s: float = Field(600, gt=0)
    """Seconds per model call when neither the model nor `--timeout` says."""
    vllm_cache_root: str = "/tmp/orchestra-ops/vllm-cache"
    """Parent of each replica's own `VLLM_CACHE_ROOT`."""
    vllm_command: list[str] = Field(default_factory=lambda: ["vllm"], min_length=1)
    """The vLLM command (a node's or model's `vllm_command` wins)."""
    ops_command: list[str] = Field(default_factory=lambda: ["ops"], min_length=1)
    """The `ops` command the nodes run (the simulated engine, the retrieval server)."""


class SimSettings(Strict):
    """How the simulated engine behaves (`engine: sim`); see `ops serve sim --help`."""

    latency_ms: float = Field(20.0, ge=0)
    """Fixed latency of every request."""
    prefill_ms_per_token: float = Field(0.0, ge=0)
    """More latency per prompt token its prefix cache did not hold."""
    decode_ms_per_token: float = Field(0.0, ge=0)
    """More latency per completion token."""
    decode_slowdown: float = Field(0.0, ge=0)
    """Decode slows with the requests in flight: decode x (1 + this x (requests in flight - 1))."""
    prefix_cache_tokens: int = Field(65536, ge=0)
    """The replica's prefix-cache capacity in tokens."""
    jitter: float = Field(0.0, ge=0, le=1)
    """Random share of the latency (0..1), seeded."""
    startup_delay_s: float = Field(0.0, ge=0)
    """Seconds before it serves (like a model loading)."""
    fail: str | None = None
    """Error rates per status, `STATUS:RATE,…`, e.g. `500:0.05,429:0.02`."""
    malformed_rate: float = Field(0.0, ge=0, le=1)
    """Share of judge replies that do not parse."""
    hang_rate: float = Field(0.0, ge=0, le=1)
    """Share of requests that never answer."""
    crash_after: int | None = Field(None, ge=1)
    """Exit after this many requests."""
    seed: int = 0
    """Seed of every random choice (the same seed, the same replies)."""

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
    """USD per million prompt tokens."""
    output_per_mtok: float = Field(ge=0)
    """USD per million completion tokens."""


class ModelRouting(Strict):
    """`routing:` how the client spreads a model's calls over its replicas (client/affinity.py).

    `affinity: session` sends every call of one session (an agent task, a tau2 side, a HealthBench
    example) to one replica, so vLLM's prefix cache holds its history, under a load bound of
    ceil(load_factor * mean) calls in flight per replica; `none` sends each call to the least loaded.
    """

    affinity: Literal["session", "none"] = "session"
    """`session`: a session's calls stay on one replica (under the load bound); `none`: the least loaded."""
    load_factor: float = Field(1.25, ge=1.0, allow_inf_nan=False)
    """The load bound: at most ceil(load_factor * mean) calls in flight per replica."""


class ModelSpec(Strict):
    model: str = Field(min_length=1)
    """The checkpoint: a hub id or a path (what vLLM serves)."""
    engine: Literal["vllm", "sim"] = "vllm"
    """`vllm`, or `sim`: the simulated engine (same ports, health and endpoints file; no GPU)."""
    node: str
    """The node (under `nodes:`) its replicas run on."""
    replicas: int = Field(1, ge=1, le=1024)
    """Data-parallel replicas: one server each, on ports `port`, `port+1`, …"""
    gpus_per_replica: int = Field(1, ge=0)
    """GPUs per replica (>1: tensor parallel inside it; 0: the CPU build of vLLM)."""
    gpus: list[Annotated[int, Field(ge=0)]] | None = None
    """Explicit GPU indices, in replica order (default: placed by ops)."""
    port: Port
    """The first replica's port."""
    served_model_name: str | None = None
    """The name clients send as `model` (default: `model`)."""
    tool_parser: str | None = None
    """vLLM's `--tool-call-parser` (implies `--enable-auto-tool-choice`; checked against the model family)."""
    reasoning_parser: str | None = None
    """vLLM's `--reasoning-parser` (reasoning goes to `message.reasoning`)."""
    vllm_command: list[str] | None = Field(None, min_length=1)
    """This model's vLLM command (default: the node's, then `defaults.vllm_command`)."""
    cpus_per_replica: int | None = Field(None, ge=1)
    """Cores per replica of the CPU build of vLLM (`gpus_per_replica: 0`)."""
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    """vLLM's `--gpu-memory-utilization` (summed per GPU, checked ≤ 1)."""
    max_model_len: int | None = Field(None, ge=1)
    """vLLM's `--max-model-len`; the context budgets of a suite read it."""
    request_defaults: dict[str, Any] = Field(default_factory=dict)
    """Merged into every request to it, e.g. `chat_template_kwargs: {enable_thinking: false}`."""
    request_timeout_s: float | None = Field(None, gt=0)
    """Seconds per call to this model (default: `defaults.request_timeout_s`)."""
    tokenizer: str | None = None
    """What counts context budgets: `estimate`, a tokenizer dir or `tokenizer.json` (default: the checkpoint
    dir, else the replicas' `/tokenize`)."""
    engine_args: list[str] = Field(default_factory=list)
    """More vLLM arguments, e.g. `[--dtype, bfloat16]` (checked by vLLM itself before launch)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables of its processes."""
    sim: SimSettings | None = None
    """How the simulated engine behaves (`engine: sim`)."""
    routing: ModelRouting = Field(default_factory=ModelRouting)
    """How calls spread over the replicas (affinity, load_factor)."""
    # LoRA adapters (orchestra_ops/lora): name -> adapter directory (relative: to where `ops` runs)
    lora_modules: dict[str, str] = Field(default_factory=dict)
    """LoRA adapters served from the start: name -> adapter directory (relative: to where ops runs)."""
    max_lora_rank: int | None = Field(None, ge=1)
    """vLLM's `--max-lora-rank` (its default: 16)."""
    max_loras: int | None = Field(None, ge=1)
    """Adapters in one batch (vLLM's `--max-loras`, default 1)."""
    runtime_lora: bool = False
    """Allow `ops lora load/unload` (sets `VLLM_ALLOW_RUNTIME_LORA_UPDATING`)."""
    pricing: Pricing | None = None
    """USD per million tokens (a self-hosted model's own accounting; its adapters share it)."""
    tensor_parallel: int | None = Field(None, ge=1)
    """Ranks of one server (default: `gpus_per_replica`; on a CPU node: ranks of one core each)."""
    pipeline_parallel: int = Field(1, ge=1)
    """Pipeline stages (across the hosts of a `hosts:` node or a slurm job's nodes, through Ray)."""
    data_parallel: DataParallel = Field(default_factory=DataParallel)
    """How `replicas` (the data-parallel size) is served: one server each, or vLLM's own data parallelism."""
    ray: RaySettings | None = None
    """Its Ray cluster's ports (stages across hosts; on one host: vLLM's Ray executor there)."""

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
    """`retrieval`: a micro-batching FAISS retrieval server (`ops serve retrieval`)."""
    node: str
    """The node it runs on."""
    port: Port
    """Its port."""
    gpu: int | None = Field(None, ge=0)
    """The GPU of its encoder (default: the CPU)."""
    index_dir: str | None = None
    """Its index (`eval.index` + `eval.jsonl`; default: `<state dir>/index/<service>`; relative: to where ops runs)."""
    corpus: str | None = None
    """A JSONL of `id`, `content`: a missing index is built from it at `ops up`."""
    encoder: str | None = None
    """A sentence-transformers model by path (default: all-MiniLM-L6-v2, offline)."""
    max_batch_size: int = Field(64, ge=1)
    """Queries encoded and searched at once."""
    max_wait_ms: float = Field(5.0, ge=0)
    """The longest a query waits for its batch to fill."""
    max_queue: int = Field(4096, ge=1)
    """Queries waiting; beyond it: 503 with Retry-After."""
    batching: bool = True
    """Micro-batching on (off: one query at a time)."""
    examples: str | None = None
    """A JSON map `eid` -> allowed document ids: a request with an `eid` returns only those."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables of its process."""


class Provider(Strict):
    """An external OpenAI-compatible API. The key is read from `api_key_env` at call time."""

    kind: Literal["openai"] = "openai"
    """`openai`: an OpenAI-compatible API."""
    model: str
    """The model name it is asked for."""
    base_url: str
    """Its base URL, e.g. `https://api.openai.com/v1`."""
    api_key_env: str | None = None
    """The environment variable that holds its key, read at call time (never the key itself)."""
    max_concurrency: int = Field(32, ge=1)
    """Calls in flight to it at once."""
    request_defaults: dict[str, Any] = Field(default_factory=dict)
    """Merged into every request to it."""
    request_timeout_s: float | None = Field(None, gt=0)
    """Seconds per call (default: `defaults.request_timeout_s`)."""
    pricing: Pricing | None = None
    """USD per million tokens, for cost in scores.json and --max-cost."""

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
    """The port it listens on."""
    bind: str = "127.0.0.1"
    """The address it listens on; anything but loopback needs `api_key_env` when a provider's key would be sent."""
    node: str | None = None
    """A node on this machine (default: the first one the topology declares)."""
    api_key_env: str | None = None
    """The variable holding the token clients send as `Authorization: Bearer $VAR`."""
    cache: bool = False
    """Answer repeated temperature-0 requests from the response cache."""

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not ENV_NAME.match(value):
            raise ValueError(f"'{value}' is not an environment variable name (the token itself never goes here)")
        return value


class EvalSettings(Strict):
    """`eval:` how `ops eval --detach slurm` runs the eval itself: an sbatch job of its own, CPU only."""

    slurm: SlurmSettings = Field(default_factory=SlurmSettings)
    """The sbatch settings of `ops eval --detach slurm` (CPU only; `--walltime` overrides `time`)."""

    @field_validator("slurm")
    @classmethod
    def _cpu_only(cls, value: SlurmSettings) -> SlurmSettings:
        if value.gpus:
            raise ValueError(f"gpus: {value.gpus}: the eval job is CPU only (the fleet's nodes have the GPUs)")
        return value


class Topology(Strict):
    name: str
    """Its name: the state dir `.ops/<name>/` and default run dirs `runs/<suite>-<name>/`."""
    backend: Literal["local", "tmux", "slurm"] = "local"
    """How nodes on this machine run their processes: `local` (children) or `tmux`; `slurm`: every node is a
    slurm node."""
    defaults: Defaults = Field(default_factory=Defaults)
    """Settings every process and call shares."""
    nodes: dict[str, Node] = Field(min_length=1)
    """Where processes run: a machine (`host`) or a slurm allocation (`slurm`)."""
    models: dict[str, ModelSpec] = Field(default_factory=dict)
    """The models ops serves: a key (what roles name) -> its replicas."""
    services: dict[str, RetrievalService] = Field(default_factory=dict)
    """Servers besides the models (the retrieval index)."""
    providers: dict[str, Provider] = Field(default_factory=dict)
    """External APIs, declared (nothing is routed by an environment variable)."""
    roles: dict[str, str] = Field(default_factory=dict)
    """What a suite asks for (`judge`, `candidate`, …) -> a model, service, provider or adapter key."""
    aliases: dict[str, str] = Field(default_factory=dict)
    """A tool alias (`search-1`, …) -> a role or model key (hle, frames, tau2's toolorchestra protocol)."""
    eval: EvalSettings | None = None
    """How `ops eval --detach slurm` runs the eval itself."""
    gateway: GatewaySettings | None = None
    """`ops serve gateway` started and stopped with the fleet: one OpenAI-compatible URL over it."""

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
