"""A dataset's fingerprint in the manifest: a file's sha256, or a directory's files (mmlu's layout)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from orchestra_ops.runner.manifest import sha256_dataset


def test_a_file_is_its_bytes(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'{"id": 1}\n')
    assert sha256_dataset(path) == hashlib.sha256(b'{"id": 1}\n').hexdigest()


def test_a_directory_is_its_files_paths_and_bytes(tmp_path: Path) -> None:
    root = tmp_path / "mmlu"
    (root / "test").mkdir(parents=True)
    (root / "dev").mkdir()
    (root / "test" / "a_test.csv").write_bytes(b"q,A,B,C,D,A\n")
    (root / "dev" / "a_dev.csv").write_bytes(b"x,A,B,C,D,B\n")
    expected = hashlib.sha256()
    for rel, data in (("dev/a_dev.csv", b"x,A,B,C,D,B\n"), ("test/a_test.csv", b"q,A,B,C,D,A\n")):
        expected.update(f"{rel}\0{hashlib.sha256(data).hexdigest()}\n".encode())
    first = sha256_dataset(root)
    assert first == expected.hexdigest()
    (root / "test" / "a_test.csv").write_bytes(b"q,A,B,C,D,B\n")  # one answer changed
    changed = sha256_dataset(root)
    assert changed != first
    (root / "test" / "a_test.csv").rename(root / "test" / "b_test.csv")  # same bytes, another subject
    assert sha256_dataset(root) not in (first, changed)
