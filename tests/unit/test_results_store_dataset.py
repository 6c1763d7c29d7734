"""Dataset ids and the open-file limit check (no network)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.dataset import load_dataset
from orchestra_ops.runner.limits import check_concurrency, files_needed


def test_duplicate_ids_are_named(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"id": "a"}\n{"id": "b"}\n{"id": "a"}\n{"id": 7}\n{"id": 7}\n{"id": "c"}\n')
    with pytest.raises(ConfigError, match=r"2 duplicate id\(s\): 'a' \(x2\), 7 \(x2\)"):
        load_dataset(path)
    assert [s["id"] for s in load_dataset(path, dedupe=True)] == ["a", "b", 7, "c"]


def test_bad_lines_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"id": "a"}\n{"prompt": "no id"}\n')
    with pytest.raises(ConfigError, match=r"d.jsonl:2: each line is a JSON object with an \"id\""):
        load_dataset(path)


def test_concurrency_over_the_open_file_limit_is_refused_with_the_numbers() -> None:
    check_concurrency(100, 4, soft=files_needed(100, 4), hard=20000)
    with pytest.raises(ConfigError, match=r"--concurrency 1000 needs about 1068 open files .* only 256 "
                                          r"\(hard limit 256\); use --concurrency 188 or less"):
        check_concurrency(1000, 4, soft=256, hard=256)
