"""Log reading for readiness: fatal lines (data-driven), tails from this run's offset."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestra_ops.core.logtail import FatalScanner, is_fatal, tail


@pytest.mark.parametrize("line", [
    "Traceback (most recent call last):",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB",
    "OSError: [Errno 98] Address already in use",
    "ERROR 05-12 10:00:01 [core.py:396] EngineCore failed to start.",
    "(EngineCore_0 pid=4242) ERROR 05-12 10:00:01 [core.py:396] EngineCore failed to start.",
    "ERROR:    [Errno 98] error while attempting to bind on address",
])
def test_fatal_lines(line: str) -> None:
    assert is_fatal(line)


@pytest.mark.parametrize("line", [
    "INFO 05-12 10:00:01 [api_server.py:1] Starting vLLM API server",
    "WARNING 05-12 no ERROR here, just a warning mentioning errors",
    "=== 2025-01-01 00:00:00 ops up: env A=1 ops serve sim --model ERROR",
])
def test_ordinary_lines(line: str) -> None:
    assert not is_fatal(line)


def test_scanner_starts_at_the_offset_and_reads_incrementally(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("Traceback (most recent call last):\nold run\n")
    scanner = FatalScanner(log, start=log.stat().st_size)
    assert scanner.scan() is None
    with log.open("a") as handle:
        handle.write("INFO loading\nERROR 1 [x] bad")
    assert scanner.scan() is None  # the last line is not complete yet
    with log.open("a") as handle:
        handle.write(" thing\n")
    assert scanner.scan() == "ERROR 1 [x] bad thing"


def test_tail_from_offset(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("old 1\nold 2\n")
    offset = log.stat().st_size
    with log.open("a") as handle:
        handle.write("".join(f"new {i}\n" for i in range(30)))
    assert tail(log, 20, start=offset) == [f"new {i}" for i in range(10, 30)]
    assert tail(log, 100, start=offset)[0] == "new 0"
    assert tail(tmp_path / "missing.log", 5) == []
