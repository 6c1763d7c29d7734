"""Datasets: JSONL, one sample per line, each with a unique `id`."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.results import TaskId, _key

Sample = dict[str, Any]


def read_jsonl(path: str | Path, what: str = "dataset") -> list[tuple[int, Any]]:
    """(line number, value) of every non-blank line of a JSONL file; errors name the file and line."""
    source = Path(path)
    try:
        text = decode_utf8(source, source.read_bytes())
    except FileNotFoundError:
        raise ConfigError(f"{source}: no such {what} file") from None
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read: {exc}") from None
    rows: list[tuple[int, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{source}:{number}: not valid JSON: {exc.msg}") from None
    return rows


def decode_utf8(source: Path, data: bytes) -> str:
    """The file's text; bytes that are not UTF-8 are a ConfigError naming the line (and column), not an offset."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        number = data.count(b"\n", 0, exc.start) + 1
        column = len(data[line_start:exc.start].decode("utf-8", errors="replace")) + 1
        raise ConfigError(f"{source}:{number}: not UTF-8 (byte 0x{data[exc.start]:02x} at column {column}); "
                          "save the file as UTF-8") from None


def load_dataset(path: str | Path, *, dedupe: bool = False) -> list[Sample]:
    """Read a JSONL dataset. A missing or duplicate id is a ConfigError naming it (`dedupe`: keep the first)."""
    source = Path(path)
    samples: list[Sample] = []
    for number, sample in read_jsonl(source):
        if not isinstance(sample, dict) or "id" not in sample:
            raise ConfigError(f"{source}:{number}: each line is a JSON object with an \"id\"")
        samples.append(sample)
    counts = Counter(sample_id(s) for s in samples)
    duplicates = [i for i, n in counts.items() if n > 1]
    if duplicates and not dedupe:
        shown = ", ".join(f"{d!r} (x{counts[d]})" for d in duplicates[:20])
        more = f" and {len(duplicates) - 20} more" if len(duplicates) > 20 else ""
        raise ConfigError(f"{source}: {len(duplicates)} duplicate id(s): {shown}{more}; results are kept per "
                          "id, so fix the dataset or pass --dedupe to keep the first of each")
    if duplicates:
        seen: set[TaskId] = set()
        unique = []
        for sample in samples:
            key = sample_id(sample)
            if key not in seen:
                seen.add(key)
                unique.append(sample)
        samples = unique
    return samples


def sample_id(sample: Sample) -> TaskId:
    return _key(sample["id"])


def text_fields_problem(row: Any, keys: tuple[str, ...]) -> str:
    """What is wrong with a dataset line that must carry each of `keys` as text ('' when nothing is):
    `no "question" (its fields: id, text)` or `"answer" is not text`, for a message that then shows the format."""
    if not isinstance(row, dict):
        return f"not a JSON object ({type(row).__name__})"
    for key in keys:
        if key not in row:
            return f"no \"{key}\" (its fields: {', '.join(map(str, row)) or 'none'})"
        if not isinstance(row[key], str):
            return f"\"{key}\" is not text ({type(row[key]).__name__})"
    return ""
