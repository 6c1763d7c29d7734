"""Counters and gauges of one simulated replica, rendered as Prometheus text at /metrics.

vLLM 0.32's names, types and labels (`engine="0",model_name=<served name>`) where vLLM has the
metric: the gauges `vllm:num_requests_running`, `vllm:num_requests_waiting` (and `…_by_reason`),
`vllm:kv_cache_usage_perc` (a fraction 0-1), `vllm:engine_sleep_state`, `vllm:cache_config_info`;
the counters (in tokens where vLLM counts tokens) `vllm:prompt_tokens_total`,
`vllm:generation_tokens_total`, `vllm:prefix_cache_queries_total` (prompt tokens looked up),
`vllm:prefix_cache_hits_total` and `vllm:prompt_tokens_cached_total` (prompt tokens found,
prefix_cache.py), `vllm:num_preemptions_total`, `vllm:request_success_total{finished_reason}` (all
five reasons, as vLLM lists them), each counter sample followed by its `_created` sample (when the
counters started: the replica's start, as prometheus_client writes it); with LoRA,
`vllm:lora_requests_info` (its labels carry the news).
The sim's own, without labels except status: `sim_requests_total`, `sim_requests_in_flight`,
`sim_max_requests_in_flight` (the most requests it has had in flight at once),
`sim_requests_failed_total{status}`, `sim_requests_hung_total`, `sim_malformed_total`,
`sim_prefill_tokens_total` (prompt tokens charged prefill time: those its prefix cache did not hold)
and `sim_decode_ms_total` (decode time charged, with the in-flight slowdown, before jitter).
KV cache usage is the estimated tokens of the requests in flight over a capacity of
16 * max_model_len tokens, capped at 1.
"""

from __future__ import annotations

import time
from collections import Counter

from orchestra_ops.services.simllm.prefix_cache import BLOCK_TOKENS

KV_CAPACITY_SEQS = 16
FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")


def _value(number: float) -> str:
    return repr(float(number))


class SimMetrics:
    def __init__(self, model: str, max_model_len: int, *, lora: bool = False, max_loras: int = 1) -> None:
        self.model = model
        self.created = time.time()  # when the counters started (each counter's `_created` sample)
        self.kv_capacity = KV_CAPACITY_SEQS * max_model_len
        self.lora = lora
        self.max_loras = max_loras
        self.requests_total = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.tokens_in_flight = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.prefix_queries = 0
        self.prefix_hits = 0
        self.success: Counter[str] = Counter()
        self.failed: Counter[int] = Counter()
        self.hung = 0
        self.malformed = 0
        self.prefill_tokens = 0
        self.decode_ms = 0.0

    def started(self) -> None:
        self.requests_total += 1
        self.in_flight += 1
        if self.in_flight > self.max_in_flight:
            self.max_in_flight = self.in_flight

    def finished(self) -> None:
        self.in_flight -= 1

    def render(self) -> str:
        escaped = self.model.replace("\\", "\\\\").replace('"', '\\"')
        inner = f'engine="0",model_name="{escaped}"'
        label = f"{{{inner}}}"
        kv = min(1.0, self.tokens_in_flight / self.kv_capacity) if self.kv_capacity else 0.0
        lines: list[str] = []

        def metric(name: str, kind: str, doc: str, samples: list[tuple[str, float]]) -> None:
            lines.append(f"# HELP {name} {doc}")
            lines.append(f"# TYPE {name} {kind}")
            for labels, value in samples:
                lines.append(f"{name}{labels} {_value(value)}")
                if kind == "counter":
                    lines.append(f"{name.removesuffix('_total')}_created{labels} {_value(self.created)}")

        metric("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
               [(label, self.in_flight)])
        metric("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", [(label, 0)])
        metric("vllm:num_requests_waiting_by_reason", "gauge", "Number of waiting requests by reason.",
               [(f'{{{inner},reason="{reason}"}}', 0) for reason in ("capacity", "deferred")])
        metric("vllm:engine_sleep_state", "gauge", "Engine sleep state.",
               [(f'{{{inner},sleep_state="{state}"}}', 1 if state == "awake" else 0)
                for state in ("awake", "weights_offloaded", "discard_all")])
        metric("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", [(label, kv)])
        metric("vllm:prefix_cache_queries_total", "counter",
               "Prefix cache queries, in terms of number of queried tokens.", [(label, self.prefix_queries)])
        metric("vllm:prefix_cache_hits_total", "counter",
               "Prefix cache hits, in terms of number of cached tokens.", [(label, self.prefix_hits)])
        metric("vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine.",
               [(label, 0)])
        metric("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
               [(label, self.prompt_tokens)])
        metric("vllm:prompt_tokens_cached_total", "counter",
               "Number of cached prompt tokens (local + external).", [(label, self.prefix_hits)])
        metric("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
               [(label, self.generation_tokens)])
        metric("vllm:request_success_total", "counter", "Count of successfully processed requests.",
               [(f'{{engine="0",finished_reason="{reason}",model_name="{escaped}"}}', self.success[reason])
                for reason in FINISHED_REASONS])
        if self.lora:
            metric("vllm:lora_requests_info", "gauge", "Running stats on lora requests.",
                   [(f'{{max_lora="{self.max_loras}",running_lora_adapters="",waiting_lora_adapters=""}}',
                     time.time())])
        metric("vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig",
               [(f'{{block_size="{BLOCK_TOKENS}",enable_prefix_caching="True",engine="0",'
                 f'kv_cache_size_tokens="{self.kv_capacity}"}}', 1)])
        lines += [
            "# TYPE sim_requests_total counter",
            f"sim_requests_total {self.requests_total}",
            "# TYPE sim_requests_in_flight gauge",
            f"sim_requests_in_flight {self.in_flight}",
            "# HELP sim_max_requests_in_flight The most chat requests in flight at once since start.",
            "# TYPE sim_max_requests_in_flight gauge",
            f"sim_max_requests_in_flight {self.max_in_flight}",
            "# TYPE sim_requests_failed_total counter",
        ]
        lines += [f'sim_requests_failed_total{{status="{s}"}} {n}' for s, n in sorted(self.failed.items())]
        lines += [
            "# TYPE sim_requests_hung_total counter",
            f"sim_requests_hung_total {self.hung}",
            "# TYPE sim_malformed_total counter",
            f"sim_malformed_total {self.malformed}",
            "# HELP sim_prefill_tokens_total Prompt tokens charged prefill time (not held by the prefix cache).",
            "# TYPE sim_prefill_tokens_total counter",
            f"sim_prefill_tokens_total {self.prefill_tokens}",
            "# HELP sim_decode_ms_total Decode time charged in ms (with the in-flight slowdown, before jitter).",
            "# TYPE sim_decode_ms_total counter",
            f"sim_decode_ms_total {_value(self.decode_ms)}",
        ]
        return "\n".join(lines) + "\n"
