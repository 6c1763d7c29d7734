"""Fault injection and latency jitter, deterministic under the seed.

Every chat request draws exactly four numbers from one `random.Random(seed)`, in arrival order, so
the n-th request to arrive always gets the same fate: `u_fail` picks an error status (the `--fail`
rates laid end to end on [0, 1)), `u_hang` < hang_rate hangs it, `u_malformed` < malformed_rate
garbles a judge answer, and `u_jitter` scales the latency by `1 + jitter * (2 * u_jitter - 1)`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from orchestra_ops.services.simllm.config import SimConfig


@dataclass(frozen=True)
class Fate:
    """What happens to one request."""

    index: int  # 1-based arrival number
    status: int | None  # an injected error status, or None
    hang: bool
    malformed: bool
    latency_factor: float


class FaultPlan:
    """Hands out each arriving request's Fate, in order."""

    def __init__(self, config: SimConfig) -> None:
        self._rng = random.Random(config.seed)
        self._bounds: list[tuple[float, int]] = []
        edge = 0.0
        for status, rate in config.fail:
            edge += rate
            self._bounds.append((edge, status))
        self._hang_rate = config.hang_rate
        self._malformed_rate = config.malformed_rate
        self._jitter = config.jitter
        self.count = 0

    def next(self) -> Fate:
        rnd = self._rng.random
        u_fail, u_hang, u_malformed, u_jitter = rnd(), rnd(), rnd(), rnd()
        self.count += 1
        status = None
        for edge, candidate in self._bounds:
            if u_fail < edge:
                status = candidate
                break
        return Fate(index=self.count, status=status, hang=status is None and u_hang < self._hang_rate,
                    malformed=u_malformed < self._malformed_rate,
                    latency_factor=1.0 + self._jitter * (2.0 * u_jitter - 1.0))
