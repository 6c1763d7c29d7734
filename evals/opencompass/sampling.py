"""`--sample N`: a seeded random subset that keeps the dataset's order (the same N rows every run)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def seeded_sample(items: Sequence[T], n: int | None, seed: int, key: str = "") -> list[T]:
    """`n` items chosen by `random.Random(f"{seed}|{key}")`, in their original order (all when n is None or >= len)."""
    if n is None or n >= len(items):
        return list(items)
    chosen = sorted(random.Random(f"{seed}|{key}").sample(range(len(items)), n))
    return [items[i] for i in chosen]
