"""Shared helpers for the retrieval integration tests: build an index, run a real server by pid."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import OPS, free_port, kill_tree, run_ops
from tests.retrieval_data import write_corpus

START_TIMEOUT_S = 180  # model load on a loaded 2-core machine; a hang guard, not a timing claim


@dataclass
class RetrievalServer:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def build_test_index(workdir: Path, count: int) -> tuple[Path, list[dict[str, Any]]]:
    """Generate a corpus of `count` documents and index it with `ops index build` (the real encoder)."""
    corpus = workdir / "corpus.jsonl"
    docs = write_corpus(corpus, count)
    index_dir = workdir / "index"
    result = run_ops(["index", "build", str(corpus), "--out", str(index_dir), "--batch-size", "128"], timeout=300)
    assert result.returncode == 0, result.stderr
    return index_dir, docs


def bundled_index(tmp_path_factory: pytest.TempPathFactory, corpus: Path) -> Path:
    """The index of `corpus` (`ops index build`, the real encoder: ~20 s of CPU), built once per test session
    and read by every module and xdist worker that asks: the first builds it under a lock, the others wait for
    it. Nothing writes to an index once built."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the session's basetemp, above each worker's popen-gwN
    index_dir, done = shared / f"index-{corpus.stem}", shared / f"index-{corpus.stem}.done"
    with (shared / f"index-{corpus.stem}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(index_dir, ignore_errors=True)  # what a build that died left
            result = run_ops(["index", "build", str(corpus), "--out", str(index_dir)], timeout=600)
            assert result.returncode == 0, result.stderr
            done.touch()
    return index_dir


def start_server(index_dir: Path, log: Path, extra: Sequence[str] = (), *, port: int | None = None) -> RetrievalServer:
    port = port or free_port()
    argv = [*OPS, "serve", "retrieval", "--index-dir", str(index_dir), "--port", str(port), *extra]
    with log.open("ab") as handle:
        proc = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
    return RetrievalServer(proc=proc, port=port, log=log)


def wait_healthy(server: RetrievalServer) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise AssertionError(f"server exited {server.proc.returncode}:\n{server.log_text()}")
        try:
            if httpx.get(f"{server.url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"server not healthy after {START_TIMEOUT_S} s:\n{server.log_text()}")


@contextmanager
def running(*servers: RetrievalServer) -> Iterator[None]:
    """Wait until every server is healthy; stop them all by pid afterwards."""
    try:
        for server in servers:
            wait_healthy(server)
        yield
    finally:
        for server in servers:
            kill_tree(server.proc.pid)


def write_examples(path: Path, mapping: dict[str, list[str]]) -> Path:
    path.write_text(json.dumps(mapping))
    return path
