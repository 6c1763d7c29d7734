"""A run reads its replicas' own counters at start and end: a replica restarted mid-run and traffic from another
client are named as such by `ops eval`'s closing lines and `ops analyze`, never folded into the hit rate."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.helpers import OPS, REPO, frozen, kill_tree
from tests.integration.eval_fixtures import dataset, model_config, results
from tests.simserver import SimServer

OTHER_CLIENT_REQUESTS = 5


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def test_a_restart_and_another_clients_traffic_are_named(tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    survivor = sim_server("m", args=["--latency-ms", "100"])
    victim = sim_server("m", args=["--latency-ms", "100"])
    config = model_config(tmp_path / "mc.json", {"m": [survivor, victim]})
    data = dataset(tmp_path / "d.jsonl", range(600))
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([*OPS, "eval", "chat", "--dataset", str(data), "--model-config", str(config), "--run-dir",
                             str(run_dir), "--concurrency", "4", "--progress-every", "0.5"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while _lines(run_dir / "results.jsonl") < 40 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before the replicas could be disturbed"
        with frozen(proc.pid):  # the run stays mid-way however long a loaded machine takes to restart the replica
            for i in range(OTHER_CLIENT_REQUESTS):  # someone else's requests to the survivor
                question = [{"role": "user", "content": f"not the run's {i}"}]
                answer = httpx.post(f"{survivor.base_url}/v1/chat/completions", timeout=30,
                                    json={"model": "m", "messages": question})
                assert answer.status_code == 200
            victim.stop()  # by pid, mid-run; then a new process on the same port: its counters start again
            restarted = sim_server("m", port=victim.port, args=["--latency-ms", "100"])
        assert proc.poll() is None, "the run ended before the replica came back"
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            kill_tree(proc.pid)
    assert proc.returncode == 0, err
    assert sorted(r["id"] for r in results(run_dir)) == list(range(600))
    events = [json.loads(line) for line in (run_dir / "profile.jsonl").read_text().splitlines()]
    readings = [(e["phase"], e["replica"]) for e in events if e["type"] == "replica_counters"]
    assert sorted(readings) == sorted((phase, f"127.0.0.1:{s.port}") for phase in ("start", "end")
                                      for s in (survivor, restarted))
    answered = sum(1 for e in events if e["type"] == "model_call" and e["status"] == "ok"
                   and e["replica"] == f"127.0.0.1:{survivor.port}")
    notes = [f"127.0.0.1:{restarted.port}: restarted during the run; only what it counted after its restart is in",
             f"127.0.0.1:{survivor.port}: finished {OTHER_CLIENT_REQUESTS} request(s) more than the run's "
             f"{answered} answered call(s) to it: traffic from other clients (another run, ops health) or calls of "
             "this run that timed out; their tokens are in its counts"]
    stats = json.loads((run_dir / "analysis" / "stats.json").read_text())
    assert sorted(stats["placement"]["m"]["prefix_cache"]["notes"]) == sorted(notes)
    for note in notes:
        assert f"note: m: {note}" in out
    metrics = (survivor.metrics(), restarted.metrics())
    cache = stats["placement"]["m"]["prefix_cache"]
    # the survivor's whole run (plus the other client's 5), the restarted one since its restart
    assert cache["queries"] == sum(m["vllm:prefix_cache_queries_total"] for m in metrics)
