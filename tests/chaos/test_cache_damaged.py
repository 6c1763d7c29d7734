"""A damaged response cache: refused at open when its pages are damaged (exit 2, the file named, PRAGMA
quick_check); damaged after it was opened, the run asks the models instead, with one warning. The issue's
reproduction: a copy of a good cache with every 97th byte after offset 4096 flipped."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestra_ops.client.cache import ResponseCache
from orchestra_ops.client.fleet_client import FleetClient
from orchestra_ops.client.identity import resolve_identities
from orchestra_ops.client.routing import from_model_config
from tests.helpers import run_ops
from tests.simserver import SimServer

MODEL = "sim/base"


def flip_every_97th_byte(path: Path) -> None:
    """Damage the file in place (same inode), as the issue's reproduction does; page 1 (the header) is kept."""
    with open(path, "r+b") as handle:
        data = bytearray(handle.read())
        for offset in range(4096, len(data), 97):
            data[offset] ^= 0xFF
        handle.seek(0)
        handle.write(bytes(data))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def sim(sim_server: Callable[..., SimServer], tmp_path: Path) -> tuple[SimServer, Path]:
    server = sim_server(MODEL, args=["--latency-ms", "1"])
    config = tmp_path / "mc.json"
    config.write_text(json.dumps({MODEL: [{"ip_addr": "127.0.0.1", "port": server.port}]}))
    return server, config


def requests(server: SimServer) -> float:
    return server.metrics()["sim_requests_total"]


def test_a_damaged_file_is_refused_at_open_naming_it(sim: tuple[SimServer, Path], tmp_path: Path) -> None:
    server, config = sim
    good = tmp_path / "C.sqlite"
    first = run_ops(["eval", "gsm8k", "--model-config", str(config), "--model", MODEL, "--cache-file", str(good),
                     "--run-dir", str(tmp_path / "R1"), "--no-analyze"], timeout=240)
    assert first.returncode == 0, first.stderr
    copy = tmp_path / "COPY.sqlite"
    shutil.copy(good, copy)
    flip_every_97th_byte(copy)
    good_sha, calls = sha256(good), requests(server)

    proc = run_ops(["eval", "gsm8k", "--model-config", str(config), "--model", MODEL, "--cache-file", str(copy),
                    "--run-dir", str(tmp_path / "R2"), "--no-analyze"], timeout=240)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"error: --cache {copy}: the file is damaged (PRAGMA quick_check: " in proc.stderr
    assert "move it away (a new cache starts empty) or give --cache-file another path" in proc.stderr
    assert "Traceback" not in proc.stderr and "malformed" not in proc.stdout
    assert requests(server) == calls  # nothing was asked of the model
    assert not (tmp_path / "R2" / "results.jsonl").exists() or (tmp_path / "R2" / "results.jsonl").stat().st_size == 0
    assert sha256(good) == good_sha  # the good cache it was copied from is untouched


def test_damage_after_open_falls_back_to_the_model_with_one_warning(sim: tuple[SimServer, Path], tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    server, config = sim
    routing = from_model_config(json.loads(config.read_text()), source=str(config), name="mc")
    identities = resolve_identities(routing, [MODEL])
    path = tmp_path / "C.sqlite"
    questions = [f"What is {n} + {n}?" for n in range(6)]

    async def ask(cache: ResponseCache) -> list[tuple[str | None, int]]:
        fleet = FleetClient(routing, cache=cache, identities=identities)
        try:
            results = [await fleet.chat(MODEL, [{"role": "user", "content": q}], temperature=0, max_tokens=16)
                       for q in questions]
        finally:
            await fleet.close()
        return [(r.content, r.attempts) for r in results]

    cache = ResponseCache(path)
    answered = asyncio.run(ask(cache))
    cache.close()
    assert [attempts for _, attempts in answered] == [1] * 6  # asked of the model, and stored
    replay = ResponseCache(path)
    assert asyncio.run(ask(replay)) == [(text, 0) for text, _ in answered]  # undamaged: every one replays
    replay.close()

    cache = ResponseCache(path)  # opened (and checked) while the file is good
    flip_every_97th_byte(path)
    damaged_sha, calls = sha256(path), requests(server)
    with caplog.at_level(logging.WARNING, logger="orchestra_ops"):
        again = asyncio.run(ask(cache))
    cache.close()
    assert again == answered  # the same answers, each from the model
    assert requests(server) == calls + len(questions)
    assert (cache.stats.errors, cache.stats.stored) == (1, 0)
    # which of the first lookup or the first store meets a damaged page depends on where the flips land
    assert cache.broken in ("a read failed: database disk image is malformed",
                            "a write failed: database disk image is malformed")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"response cache {path}: {cache.broken}; the rest of this run asks the models and stores "
                        f"nothing in it (`sqlite3 {path} 'PRAGMA quick_check'` says what is damaged)"]
    assert sha256(path) == damaged_sha  # nothing more was written into the damaged file
