"""Counters and gauges of one simulated replica, rendered as Prometheus text at /metrics.

vLLM's names where vLLM has one (`vllm:num_requests_running`, `vllm:num_requests_waiting`,
`vllm:kv_cache_usage_perc`, `vllm:prompt_tokens_total`, `vllm:generation_tokens_total`,
`vllm:request_success_total`), labelled `model_name`; the sim's own without labels except status:
`sim_requests_total`, `sim_requests_in_flight`, `sim_max_requests_in_flight` (the most requests it
has had in flight at once), `sim_requests_failed_total{status}`, `sim_requests_hung_total`,
`sim_malformed_total`. KV cache usage is the estimated tokens of the requests in flight over a
capacity of 16 * max_model_len tokens, capped at 1.
"""

from __future__ import annotations

from collections import Counter

KV_CAPACITY_SEQS = 16


class SimMetrics:
    def __init__(self, model: str, max_model_len: int) -> None:
        self.model = model
        self.kv_capacity = KV_CAPACITY_SEQS * max_model_len
        self.requests_total = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.tokens_in_flight = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.success: Counter[str] = Counter()
        self.failed: Counter[int] = Counter()
        self.hung = 0
        self.malformed = 0

    def started(self) -> None:
        self.requests_total += 1
        self.in_flight += 1
        if self.in_flight > self.max_in_flight:
            self.max_in_flight = self.in_flight

    def finished(self) -> None:
        self.in_flight -= 1

    def render(self) -> str:
        escaped = self.model.replace("\\", "\\\\").replace('"', '\\"')
        label = f'{{model_name="{escaped}"}}'
        kv = min(1.0, self.tokens_in_flight / self.kv_capacity) if self.kv_capacity else 0.0
        lines = [
            "# HELP vllm:num_requests_running Number of requests in model execution batches.",
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{label} {self.in_flight}",
            "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting{label} 0",
            "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
            "# TYPE vllm:kv_cache_usage_perc gauge",
            f"vllm:kv_cache_usage_perc{label} {kv:.6f}",
            "# TYPE vllm:prompt_tokens_total counter",
            f"vllm:prompt_tokens_total{label} {self.prompt_tokens}",
            "# TYPE vllm:generation_tokens_total counter",
            f"vllm:generation_tokens_total{label} {self.generation_tokens}",
            "# TYPE vllm:request_success_total counter",
        ]
        inner = label[1:-1]
        for reason in sorted(self.success) or ["stop"]:
            lines.append(f'vllm:request_success_total{{{inner},finished_reason="{reason}"}} '
                         f"{self.success[reason]}")
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
        ]
        return "\n".join(lines) + "\n"
