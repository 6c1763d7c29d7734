"""`SimConfig`: every option of the simulated engine, validated once (a bad value is a ConfigError)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from orchestra_ops.errors import ConfigError

DEFAULT_MAX_MODEL_LEN = 32768
DEFAULT_PREFIX_CACHE_TOKENS = 65536  # vLLM's cache for --kv-cache-memory-bytes 64M on the tiny model
_FAIL_PART = re.compile(r"\s*(\d{3})\s*:\s*([0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?)\s*")


def parse_fail_spec(spec: str | None) -> tuple[tuple[int, float], ...]:
    """`"500:0.05,429:0.02"` -> ((500, 0.05), (429, 0.02)); statuses 400-599, rates summing to <= 1."""
    if spec is None or not spec.strip():
        return ()
    out: list[tuple[int, float]] = []
    for part in spec.split(","):
        match = _FAIL_PART.fullmatch(part)
        if not match:
            raise ConfigError(f"--fail: '{part.strip()}' is not STATUS:RATE (e.g. 500:0.05,429:0.02)")
        status, rate = int(match.group(1)), float(match.group(2))
        if not 400 <= status <= 599:
            raise ConfigError(f"--fail: status {status} is not an HTTP error status (400-599)")
        if not 0.0 <= rate <= 1.0:
            raise ConfigError(f"--fail: rate {rate} for {status} is not between 0 and 1")
        if any(status == seen for seen, _ in out):
            raise ConfigError(f"--fail: status {status} is given twice")
        out.append((status, rate))
    total = sum(rate for _, rate in out)
    if total > 1.0 + 1e-9:
        raise ConfigError(f"--fail: the rates sum to {total:g}, more than 1")
    return tuple(out)


@dataclass(frozen=True)
class SimConfig:
    """How one simulated replica behaves. Times in ms unless the name says otherwise."""

    model: str
    host: str = "127.0.0.1"
    port: int = 8000
    max_model_len: int = DEFAULT_MAX_MODEL_LEN
    latency_ms: float = 20.0
    prefill_ms_per_token: float = 0.0  # per prompt token the prefix cache did not hold (as vLLM computes only those)
    decode_ms_per_token: float = 0.0
    decode_slowdown: float = 0.0  # decode time x (1 + decode_slowdown * (requests in flight - 1))
    prefix_cache_tokens: int = DEFAULT_PREFIX_CACHE_TOKENS  # the prefix cache's capacity (whole 128-token blocks)
    jitter: float = 0.0
    startup_delay_s: float = 0.0
    fail: tuple[tuple[int, float], ...] = ()
    malformed_rate: float = 0.0
    hang_rate: float = 0.0
    crash_after: int | None = None
    seed: int = 0
    retry_after_s: float = 1.0
    # LoRA (services/simllm/lora.py): vLLM's flags, and its VLLM_ALLOW_RUNTIME_LORA_UPDATING
    enable_lora: bool = False
    lora_modules: tuple[str, ...] = ()  # vLLM's items: NAME=PATH or {"name", "path", "base_model_name"}
    max_lora_rank: int = 16
    max_loras: int = 1
    runtime_lora: bool = False
    # vLLM's usage flags (app.py): prompt_tokens_details with prefix-cache hits, usage on every chunk
    enable_prompt_tokens_details: bool = False
    enable_force_include_usage: bool = False

    def __post_init__(self) -> None:
        problems: list[str] = []
        if not self.model.strip():
            problems.append("--model: must not be empty")
        if not 1 <= self.port <= 65535:
            problems.append(f"--port: {self.port} is not in 1..65535")
        if self.max_model_len < 1:
            problems.append(f"--max-model-len: {self.max_model_len} must be >= 1")
        for name in ("latency_ms", "prefill_ms_per_token", "decode_ms_per_token", "decode_slowdown",
                     "startup_delay_s", "retry_after_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                problems.append(f"--{name.replace('_', '-')}: {value} must be a number >= 0")
        for name in ("jitter", "malformed_rate", "hang_rate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                problems.append(f"--{name.replace('_', '-')}: {value} must be between 0 and 1")
        if self.prefix_cache_tokens < 0:
            problems.append(f"--prefix-cache-tokens: {self.prefix_cache_tokens} must be >= 0")
        if self.crash_after is not None and self.crash_after < 1:
            problems.append(f"--crash-after: {self.crash_after} must be >= 1")
        if sum(rate for _, rate in self.fail) > 1.0 + 1e-9:
            problems.append("--fail: the rates sum to more than 1")
        if self.lora_modules and not self.enable_lora:
            problems.append("--lora-modules: needs --enable-lora")
        if self.max_lora_rank < 1 or self.max_loras < 1:
            problems.append("--max-lora-rank and --max-loras must be >= 1")
        if problems:
            raise ConfigError("\n".join(problems))
