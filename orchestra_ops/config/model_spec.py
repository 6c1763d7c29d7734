"""A model's part of the topology schema (`models:` in the topology file): ModelSpec and the settings it
holds: the simulated engine's (SimSettings), its routing over replicas (ModelRouting) and what a call costs
(Pricing, which a provider's entry shares). topology.py composes them into a Topology.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from orchestra_ops.config.nodes import Port, Strict
from orchestra_ops.config.parallel import DataParallel, RaySettings


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
