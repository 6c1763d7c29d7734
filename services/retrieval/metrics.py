"""Prometheus text for GET /metrics: queue depth, batch sizes, request latency, request counts."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

PREFIX = "retrieval"
BATCH_BUCKETS: tuple[float, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
LATENCY_BUCKETS: tuple[float, ...] = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class Histogram:
    """A cumulative-bucket histogram, safe to observe from several threads."""

    def __init__(self, name: str, help_text: str, buckets: Sequence[float]) -> None:
        self.name, self.help_text = name, help_text
        self.buckets = tuple(sorted(buckets))
        self._counts = [0] * len(self.buckets)
        self._sum = 0.0
        self._count = 0
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        with self._lock:
            self._sum += value
            self._count += 1
            for i, bound in enumerate(self.buckets):
                if value <= bound:
                    self._counts[i] += 1
                    break

    @property
    def count(self) -> int:
        return self._count

    def render(self) -> list[str]:
        with self._lock:
            counts, total, count = list(self._counts), self._sum, self._count
        lines = [f"# HELP {self.name} {self.help_text}", f"# TYPE {self.name} histogram"]
        cumulative = 0
        for bound, n in zip(self.buckets, counts, strict=True):
            cumulative += n
            lines.append(f'{self.name}_bucket{{le="{_num(bound)}"}} {cumulative}')
        lines.append(f'{self.name}_bucket{{le="+Inf"}} {count}')
        lines.append(f"{self.name}_sum {total:.6f}")
        lines.append(f"{self.name}_count {count}")
        return lines


class ServerMetrics:
    """Everything /metrics reports. The queue depth is read from the dispatcher when rendered."""

    def __init__(self) -> None:
        self.batch_size = Histogram(f"{PREFIX}_batch_size", "Queries per encode+search batch.", BATCH_BUCKETS)
        self.latency = Histogram(
            f"{PREFIX}_request_latency_seconds",
            "Time from a /retrieve request's arrival to its answer.",
            LATENCY_BUCKETS,
        )
        self._responses: dict[int, int] = {}
        self._lock = threading.Lock()
        self.queue_depth: Callable[[], int] = lambda: 0
        self.queued_queries: Callable[[], int] = lambda: 0

    def count_response(self, status: int) -> None:
        with self._lock:
            self._responses[status] = self._responses.get(status, 0) + 1

    def render(self) -> str:
        lines = [
            f"# HELP {PREFIX}_queue_depth Requests waiting for the encoder.",
            f"# TYPE {PREFIX}_queue_depth gauge",
            f"{PREFIX}_queue_depth {self.queue_depth()}",
            f"# HELP {PREFIX}_queue_queries Queries waiting for the encoder.",
            f"# TYPE {PREFIX}_queue_queries gauge",
            f"{PREFIX}_queue_queries {self.queued_queries()}",
            *self.batch_size.render(),
            *self.latency.render(),
            f"# HELP {PREFIX}_requests_total /retrieve responses by status code.",
            f"# TYPE {PREFIX}_requests_total counter",
        ]
        with self._lock:
            responses = sorted(self._responses.items())
        lines += [f'{PREFIX}_requests_total{{code="{code}"}} {n}' for code, n in responses]
        return "\n".join(lines) + "\n"


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
