"""A capacity test through the same FleetClient, pool and client an eval uses (`ops bench`)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestra_ops.client.call_errors import CallError
from orchestra_ops.client.fleet_client import FleetClient

BENCH_PROMPT = [{"role": "user", "content": "Reply with one short sentence: what is a capacity test?"}]


@dataclass
class CapacityResult:
    concurrency: int
    requests: int
    ok: int
    elapsed_s: float
    latencies_s: list[float] = field(repr=False)
    errors: dict[str, int]

    @property
    def req_per_s(self) -> float:
        return self.requests / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def percentile(self, q: float) -> float | None:
        if not self.latencies_s:
            return None
        ordered = sorted(self.latencies_s)
        index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))
        return ordered[index]

    def to_json(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "requests": self.requests, "ok": self.ok,
                "elapsed_s": round(self.elapsed_s, 3), "req_per_s": round(self.req_per_s, 1),
                "p50_s": _r(self.percentile(50)), "p90_s": _r(self.percentile(90)),
                "p99_s": _r(self.percentile(99)), "errors": self.errors}


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


async def measure(fleet: FleetClient, name: str, *, concurrency: int, requests: int,
                  max_tokens: int = 16) -> CapacityResult:
    """`requests` chat calls to `name` with `concurrency` in flight; every call counted, ok or not."""
    client = fleet.client(name)
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    remaining = iter(range(requests))

    async def worker() -> None:
        for _ in remaining:
            start = time.perf_counter()
            try:
                await client.chat(BENCH_PROMPT, role=name, max_tokens=max_tokens)
            except CallError as exc:
                errors[exc.kind] += 1
            else:
                latencies.append(time.perf_counter() - start)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(min(concurrency, requests))))
    return CapacityResult(concurrency, requests, len(latencies), time.perf_counter() - start, latencies,
                          dict(errors))


def knee(results: Sequence[CapacityResult], min_gain: float = 0.10) -> int | None:
    """The concurrency after which throughput grows by less than `min_gain` (None: it kept growing)."""
    for previous, current in itertools.pairwise(results):
        if current.req_per_s < previous.req_per_s * (1 + min_gain):
            return previous.concurrency
    return None


async def run_capacity(fleet: FleetClient, name: str, levels: Sequence[int], *, requests: int,
                       max_tokens: int = 16) -> list[CapacityResult]:
    """One measurement per concurrency level, through one fleet (connections stay warm between levels)."""
    try:
        return [await measure(fleet, name, concurrency=level, requests=requests, max_tokens=max_tokens)
                for level in levels]
    finally:
        await fleet.close()
