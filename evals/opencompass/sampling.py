"""`--sample N`: a seeded random subset that keeps the dataset's order (the same N rows every run);
`--subject`: the subjects of a per-subject dataset (mmlu, cmmlu) a run takes."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.dataset import Sample

T = TypeVar("T")


def seeded_sample(items: Sequence[T], n: int | None, seed: int, key: str = "") -> list[T]:
    """`n` items chosen by `random.Random(f"{seed}|{key}")`, in their original order (all when n is None or >= len)."""
    if n is None or n >= len(items):
        return list(items)
    chosen = sorted(random.Random(f"{seed}|{key}").sample(range(len(items)), n))
    return [items[i] for i in chosen]


def by_subject(samples: Sequence[Sample], options: Mapping[str, Any]) -> tuple[dict[str, list[Sample]], list[str]]:
    """The samples of each subject, and the subjects `--subject` asks for (default: all); an unknown one is
    bad input naming the subjects there are."""
    grouped: dict[str, list[Sample]] = {}
    for sample in samples:
        grouped.setdefault(sample["subject"], []).append(sample)
    wanted = list(options.get("subjects") or ()) or sorted(grouped)
    unknown = [s for s in wanted if s not in grouped]
    if unknown:
        raise ConfigError(f"--subject {unknown[0]}: not in the dataset (subjects: {', '.join(sorted(grouped))})")
    return grouped, wanted


def sample_subjects(grouped: Mapping[str, Sequence[Sample]], wanted: Sequence[str],
                    options: Mapping[str, Any]) -> list[Sample]:
    """`--sample N --seed S` per subject, subjects in name order."""
    seed, count = int(options.get("seed") or 0), options.get("sample")
    return [s for subject in sorted(wanted) for s in seeded_sample(grouped[subject], count, seed, subject)]
