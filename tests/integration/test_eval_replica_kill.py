"""A replica killed in the middle of a run costs no task: its requests are retried on the other."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from tests.helpers import OPS, REPO, kill_tree
from tests.integration.eval_fixtures import dataset, model_config, results
from tests.simserver import SimServer


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def test_killing_a_replica_mid_run_loses_no_task(tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    survivor = sim_server("m", args=["--latency-ms", "30"])
    victim = sim_server("m", args=["--latency-ms", "30"])
    config = model_config(tmp_path / "mc.json", {"m": [survivor, victim]})
    data = dataset(tmp_path / "d.jsonl", range(300))
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([*OPS, "eval", "chat", "--no-analyze", "--dataset", str(data), "--model-config",
                             str(config), "--run-dir", str(run_dir), "--concurrency", "8", "--progress-every", "0.5"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while _lines(run_dir / "results.jsonl") < 40 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before the replica could be killed"
        victim.stop()  # by pid, while requests are in flight on it
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            kill_tree(proc.pid)
    assert proc.returncode == 0, err
    records = results(run_dir)
    assert sorted(r["id"] for r in records) == list(range(300))
    assert all(r["status"] == "ok" for r in records)
    assert f"replica 127.0.0.1:{victim.port} ejected" in out
    assert all(r["replica"] == f"127.0.0.1:{survivor.port}" for r in records[-100:])
