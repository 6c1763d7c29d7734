"""What to retry and how long to wait: bounded attempts, exponential backoff with jitter, Retry-After."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

RETRYABLE_STATUS = frozenset({408, 429})


def is_retryable_status(status: int) -> bool:
    """429, 408 and every 5xx retry; other 4xx (a 400 above all) would fail the same way again."""
    return status in RETRYABLE_STATUS or 500 <= status <= 599


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from a `Retry-After: <seconds>` header (HTTP-dates are ignored), or None."""
    value = None
    for key, item in headers.items():
        if key.lower() == "retry-after":
            value = item
            break
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return max(0.0, seconds)


@dataclass(frozen=True)
class RetryPolicy:
    """`attempts` tries per call (the first included); the n-th wait is base * 2**(n-1), capped, jittered."""

    attempts: int = 3
    backoff_base_s: float = 0.5
    backoff_max_s: float = 8.0
    retry_after_max_s: float = 60.0

    def delay(self, failed_attempt: int, retry_after: float | None = None,
              rng: random.Random | None = None) -> float:
        """Seconds to wait after attempt `failed_attempt` (1-based) failed."""
        draw = (rng or random).uniform(0.5, 1.0)  # jitter: spread retries that failed together
        backoff = min(self.backoff_max_s, self.backoff_base_s * 2 ** (failed_attempt - 1)) * draw
        if retry_after is not None:
            return max(backoff, min(retry_after, self.retry_after_max_s))
        return backoff
