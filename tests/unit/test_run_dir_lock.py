"""RunDirLock in one process: flock is per open file, so a second acquire is refused like another process's."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from orchestra_ops.runner.lock import RunDirBusy, RunDirLock


def test_a_second_acquire_is_refused_naming_the_holder_and_a_release_empties_the_file(tmp_path: Path) -> None:
    lock = RunDirLock.acquire(tmp_path / "run")
    assert lock.takeover is None
    holder = json.loads((tmp_path / "run" / ".lock").read_text())
    assert (holder["pid"], holder["host"]) == (os.getpid(), socket.gethostname())
    with pytest.raises(RunDirBusy) as busy:
        RunDirLock.acquire(tmp_path / "run")
    assert busy.value.exit_code == 2
    assert f"is in use by another `ops eval`: pid {os.getpid()} on host {socket.gethostname()} since " \
           f"{holder['since']};" in str(busy.value)
    lock.release()
    assert (tmp_path / "run" / ".lock").read_text() == ""
    again = RunDirLock.acquire(tmp_path / "run")
    assert again.takeover is None
    again.release()


def test_a_holder_left_in_the_file_without_a_flock_is_taken_over(tmp_path: Path) -> None:
    (tmp_path / ".lock").write_text(json.dumps({"pid": 4242, "host": "gone", "since": "2026-01-01T00:00:00+0000"}))
    lock = RunDirLock.acquire(tmp_path)
    assert lock.takeover == (f"took over the lock of {tmp_path} left by a run that did not finish cleanly "
                             "(pid 4242 on host gone since 2026-01-01T00:00:00+0000; that process no longer holds it)")
    assert json.loads((tmp_path / ".lock").read_text())["pid"] == os.getpid()
    lock.release()
