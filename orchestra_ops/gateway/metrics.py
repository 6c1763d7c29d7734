"""The gateway's own counters, rendered as Prometheus text on `GET /metrics`.

    ops_gateway_requests_total{model, replica, code}   answers sent (code "cache" for a cache hit)
    ops_gateway_errors_total{model, kind}              failed requests by kind (http_503, timeout,
                                                       connection, no_replica, stream_cut, …)
    ops_gateway_retries_total{model}                   attempts beyond the first
    ops_gateway_in_flight{model}                       requests being answered now
    ops_gateway_replica_in_flight{model, replica}      requests each replica has from the gateway now
    ops_gateway_request_duration_seconds{model}        histogram of end-to-end latency (to the last byte)

`model` is the target key the request's `model` resolved to (a model, adapter or provider).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable, Iterable

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Histogram:
    __slots__ = ("count", "counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.count = 0
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.count += 1
        self.total += seconds


class GatewayMetrics:
    def __init__(self) -> None:
        self.requests: dict[tuple[str, str, str], int] = defaultdict(int)
        self.errors: dict[tuple[str, str], int] = defaultdict(int)
        self.retries: dict[str, int] = defaultdict(int)
        self.in_flight: dict[str, int] = defaultdict(int)
        self.latency: dict[str, Histogram] = defaultdict(Histogram)

    def answered(self, model: str, replica: str, code: str, seconds: float) -> None:
        self.requests[(model, replica, code)] += 1
        self.latency[model].observe(seconds)

    def failed(self, model: str, kind: str) -> None:
        self.errors[(model, kind)] += 1

    def render(self, replica_loads: Iterable[tuple[str, str, int]] = ()) -> str:
        """Prometheus text; `replica_loads` gives (model, replica, in flight) per replica of the pools."""
        out: list[str] = []
        emit = out.append
        _family(emit, "ops_gateway_requests_total", "counter", "Answers sent, by model, replica and status code.",
                ((f'model="{_label(m)}",replica="{_label(r)}",code="{_label(c)}"', n)
                 for (m, r, c), n in sorted(self.requests.items())))
        _family(emit, "ops_gateway_errors_total", "counter", "Requests that failed, by model and kind.",
                ((f'model="{_label(m)}",kind="{_label(k)}"', n) for (m, k), n in sorted(self.errors.items())))
        _family(emit, "ops_gateway_retries_total", "counter", "Attempts beyond the first, by model.",
                ((f'model="{_label(m)}"', n) for m, n in sorted(self.retries.items())))
        _family(emit, "ops_gateway_in_flight", "gauge", "Requests being answered now, by model.",
                ((f'model="{_label(m)}"', n) for m, n in sorted(self.in_flight.items())))
        _family(emit, "ops_gateway_replica_in_flight", "gauge", "Requests each replica has from the gateway now.",
                ((f'model="{_label(m)}",replica="{_label(r)}"', n) for m, r, n in replica_loads))
        name = "ops_gateway_request_duration_seconds"
        emit(f"# HELP {name} End-to-end latency of answered requests (to the last byte), by model.")
        emit(f"# TYPE {name} histogram")
        for model, hist in sorted(self.latency.items()):
            label = f'model="{_label(model)}"'
            running = 0
            for bound, count in zip(BUCKETS, hist.counts, strict=False):
                running += count
                emit(f'{name}_bucket{{{label},le="{bound:g}"}} {running}')
            emit(f'{name}_bucket{{{label},le="+Inf"}} {hist.count}')
            emit(f"{name}_sum{{{label}}} {hist.total:.6f}")
            emit(f"{name}_count{{{label}}} {hist.count}")
        return "\n".join(out) + "\n"


def _family(emit: Callable[[str], None], name: str, kind: str, help_text: str,
            samples: Iterable[tuple[str, int]]) -> None:
    emit(f"# HELP {name} {help_text}")
    emit(f"# TYPE {name} {kind}")
    for labels, value in samples:
        emit(f"{name}{{{labels}}} {value}")
