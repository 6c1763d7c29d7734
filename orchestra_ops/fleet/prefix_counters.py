"""A replica's own counters that show whether session affinity works, read from its `/metrics`.

vLLM 0.32 (and the sim) count prefix-cache use in prompt tokens, in whole 128-token blocks:
`vllm:prefix_cache_queries_total` (tokens looked up) and `vllm:prefix_cache_hits_total` (tokens
found). `vllm:request_success_total{finished_reason}` (summed over reasons) counts the requests
it finished, and each counter's `_created` sample is when it started counting: a different value
later means the engine restarted (its counters began again at zero). Samples are summed over
label sets (several engines or models), `_created` is their latest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

HITS = "vllm:prefix_cache_hits_total"
QUERIES = "vllm:prefix_cache_queries_total"
REQUESTS = "vllm:request_success_total"
CREATED = "vllm:prefix_cache_queries_created"
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


@dataclass(frozen=True)
class PrefixCounters:
    hits: float  # prompt tokens found in the prefix cache
    queries: float  # prompt tokens looked up
    requests: float | None = None  # requests finished (None: not exposed)
    created: float | None = None  # when the counters started (epoch s; None: not exposed)

    @property
    def hit_rate(self) -> float | None:
        return self.hits / self.queries if self.queries > 0 else None

    def to_json(self) -> dict[str, Any]:
        return {"hits": self.hits, "queries": self.queries, "requests": self.requests, "created": self.created}

    @classmethod
    def from_json(cls, data: Any) -> PrefixCounters | None:
        if not isinstance(data, dict):
            return None
        try:
            return cls(float(data["hits"]), float(data["queries"]), _opt(data.get("requests")),
                       _opt(data.get("created")))
        except (KeyError, TypeError, ValueError):
            return None


def parse_prefix_counters(text: str) -> PrefixCounters | None:
    """The counters of a Prometheus text, or None when it has no prefix-cache counters (not vLLM)."""
    sums: dict[str, float] = {}
    created: float | None = None
    for line in text.splitlines():
        match = _SAMPLE.match(line.strip())
        if not match or match.group(1) not in (HITS, QUERIES, REQUESTS, CREATED):
            continue
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        if match.group(1) == CREATED:
            created = value if created is None else max(created, value)
        else:
            sums[match.group(1)] = sums.get(match.group(1), 0.0) + value
    if HITS not in sums or QUERIES not in sums:
        return None
    return PrefixCounters(sums[HITS], sums[QUERIES], sums.get(REQUESTS), created)


@dataclass(frozen=True)
class CounterWindow:
    """What a replica counted between two readings, and whether those are only this window's."""

    hits: float
    queries: float
    requests: float | None
    restarted: bool  # the counters began again in between: only what came after the restart is counted

    @property
    def hit_rate(self) -> float | None:
        return self.hits / self.queries if self.queries > 0 else None


def window(start: PrefixCounters, end: PrefixCounters) -> CounterWindow:
    """end - start; after a restart (a new `_created`, or a counter that went down) the end values alone."""
    went_down = end.hits < start.hits or end.queries < start.queries or (
        start.requests is not None and end.requests is not None and end.requests < start.requests)
    restarted = went_down or (start.created is not None and end.created is not None
                              and abs(end.created - start.created) > 1e-3)
    if restarted:
        return CounterWindow(end.hits, end.queries, end.requests, True)
    requests = None if start.requests is None or end.requests is None else end.requests - start.requests
    return CounterWindow(end.hits - start.hits, end.queries - start.queries, requests, False)


def _opt(value: Any) -> float | None:
    return None if value is None else float(value)
