"""The response cache under abuse: several processes writing one file at once, and a writer killed
with SIGKILL mid-stream. Real processes, one SQLite file, read back afterwards."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from orchestra_ops.client.cache import ResponseCache, request_key
from tests.helpers import REPO

WRITER = """
import pathlib, sys, time
from orchestra_ops.client.cache import ResponseCache, request_key
path, who, count, writers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
cache = ResponseCache(path)
gate = pathlib.Path(path).parent
(gate / f"ready-{who}").touch()
deadline = time.monotonic() + 120
while len(list(gate.glob("ready-*"))) < writers and time.monotonic() < deadline:
    time.sleep(0.005)  # every writer starts writing together
for i in range(count):
    for key_of in (f"{who}-{i}", f"shared-{i}"):  # its own keys, and keys every writer writes
        body = {"model": "m", "messages": [{"role": "user", "content": key_of}], "temperature": 0}
        cache.put(request_key(body), "m", f"answer to {key_of}".encode())
    if i % 25 == 0:
        print(i, flush=True)
cache.close()
print("done", flush=True)
"""

ENDLESS = """
import sys
from orchestra_ops.client.cache import ResponseCache, request_key
cache = ResponseCache(sys.argv[1])
i = 0
while True:
    body = {"model": "m", "messages": [{"role": "user", "content": f"q{i}"}], "temperature": 0}
    cache.put(request_key(body), "m", (f"answer {i} " * 50).encode())
    print(i, flush=True)  # after the commit: every number printed is stored
    i += 1
"""


def key(text: str) -> str:
    return request_key({"model": "m", "messages": [{"role": "user", "content": text}], "temperature": 0})


def spawn(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code, *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})


def integrity(path: Path) -> str:
    db = sqlite3.connect(str(path))
    try:
        return str(db.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        db.close()


def test_many_processes_write_one_cache_file_at_once(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    writers, count = 4, 1000
    procs = [spawn(WRITER, str(path), f"w{n}", str(count), str(writers)) for n in range(writers)]
    try:
        outputs = [p.communicate(timeout=240) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (out, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, err
        assert out.splitlines()[-1] == "done"
    assert integrity(path) == "ok"
    cache = ResponseCache(path)
    assert cache.count() == writers * count + count  # every own key, and each shared key once
    for n in range(writers):
        for i in (0, count // 2, count - 1):
            assert cache.get(key(f"w{n}-{i}")) == f"answer to w{n}-{i}".encode()
    assert cache.get(key(f"shared-{count - 1}")) == f"answer to shared-{count - 1}".encode()
    cache.close()


def test_a_writer_killed_with_sigkill_loses_nothing_it_committed(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    proc = spawn(ENDLESS, str(path))
    printed: list[int] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 120
        while len(printed) < 300 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            printed.append(int(line))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert len(printed) >= 300, proc.stderr.read() if proc.stderr else ""
    assert Path(f"{path}-wal").exists()  # it died with its write-ahead log not checkpointed
    assert integrity(path) == "ok"
    cache = ResponseCache(path)
    for i in printed:
        assert cache.get(key(f"q{i}")) == (f"answer {i} " * 50).encode()
    assert cache.count() >= len(printed)
    # and the file takes writes again at once
    cache.put(key("after"), "m", b"ok")
    assert cache.get(key("after")) == b"ok"
    cache.close()
