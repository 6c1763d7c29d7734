"""The topology file's schema: one YAML that declares nodes, models, services, providers and roles.

Pydantic models with `extra="forbid"` everywhere; a model's entry (ModelSpec) is in model_spec.py, a node's in
nodes.py. `config/loader.py` reads a file into them (keeping each node's line) and runs the cross-field checks
of `config/checks.py`.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator

from orchestra_ops.config.model_spec import ModelSpec, Pricing
from orchestra_ops.config.nodes import LOCAL_HOSTS as LOCAL_HOSTS  # re-exported: nodes are part of the schema
from orchestra_ops.config.nodes import Node as Node
from orchestra_ops.config.nodes import Port as Port
from orchestra_ops.config.nodes import SlurmSettings as SlurmSettings
from orchestra_ops.config.nodes import SshSettings as SshSettings
from orchestra_ops.config.nodes import Strict

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TOPOLOGY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
KEY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


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
