"""Disk full: a real tmpfs (mounted by the test, as root) holds the run dir and is filled mid-run.
The run stops cleanly (exit 4, one message naming the path and `free space, then --resume`, no
traceback); what it could not write stays missing (not failed), and --resume finishes the run."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.chaos_fixtures import answers, chat_eval, module_sim, start_ops
from tests.helpers import kill_tree, run_ops
from tests.integration.eval_fixtures import dataset, model_config, results, wait_lines
from tests.simserver import SimServer

pytestmark = pytest.mark.destructive  # mounts a tmpfs (tests/conftest.py: its own xdist group)

IDS = [f"d{i}" for i in range(600)]


@pytest.fixture(scope="module")
def sim(tmp_path_factory: Any) -> Iterator[SimServer]:
    yield from module_sim(tmp_path_factory, ["--latency-ms", "50"])


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs of its own, unmounted at teardown."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "fs"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], capture_output=True, check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)


def _fill(directory: Path) -> Path:
    """Write a file until the file system is full (down to the last byte it takes)."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as handle:
        for size in (1 << 16, 4096, 256, 1):
            with contextlib.suppress(OSError):
                while True:
                    handle.write(b"\0" * size)
    with pytest.raises(OSError) as full, open(directory / "probe", "ab", buffering=0) as probe:
        probe.write(b"\0" * 4096)
    assert full.value.errno == errno.ENOSPC
    return filler


def test_a_full_disk_stops_the_run_cleanly_and_resume_finishes_it(tmp_path: Path, tmpfs: Path,
                                                                   sim: SimServer) -> None:
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    data = dataset(tmp_path / "d.jsonl", IDS)
    clean = tmp_path / "clean"
    reference = run_ops(chat_eval(config, clean, "--dataset", str(data), "--concurrency", "32"))
    assert reference.returncode == 0, reference.stderr

    run_dir = tmpfs / "run"
    base = chat_eval(config, run_dir, "--concurrency", "4")
    proc = start_ops([*base, "--dataset", str(data)])
    try:
        wait_lines(run_dir / "results.jsonl", 40, proc)
        filler = _fill(tmpfs)
        out, err = proc.communicate(timeout=120)
    finally:
        kill_tree(proc.pid)
    assert proc.returncode == 4, err
    assert "Traceback" not in err and "Traceback" not in out
    found = re.fullmatch(r"error: (\S+): no space left on device; the run stopped \(no new tasks; tasks whose "
                         r"result could not be written stay missing, not failed\): free space, then --resume\n", err)
    assert found, err
    assert Path(found.group(1)).parent == run_dir
    assert Path(found.group(1)).name in ("results.jsonl", "profile.jsonl", "eval.log")
    kept = results(run_dir)  # every line whole: a batch that did not fit was cut back out
    assert 40 <= len(kept) < len(IDS)
    assert all(r["status"] == "ok" for r in kept)  # nothing recorded as failed for want of space
    assert len({r["id"] for r in kept}) == len(kept)
    for line in (run_dir / "profile.jsonl").read_text().splitlines():
        json.loads(line)

    refused_while_full = run_ops([*base, "--resume"])
    assert refused_while_full.returncode == 4, refused_while_full.stderr
    assert "free space, then --resume" in refused_while_full.stderr
    assert "Traceback" not in refused_while_full.stderr

    filler.unlink()
    resumed = run_ops([*base, "--resume"])
    assert resumed.returncode == 0, resumed.stderr
    assert Counter(r["id"] for r in results(run_dir)) == Counter(IDS)  # every id exactly once
    assert answers(run_dir) == answers(clean)
    assert json.loads((run_dir / "scores.json").read_text())["ok"] == len(IDS)
