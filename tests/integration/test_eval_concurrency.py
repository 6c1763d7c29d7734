"""The concurrency cap holds exactly (summed over replicas), and a run's files are all there."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.helpers import model_calls, run_ops
from tests.integration.eval_fixtures import dataset, model_config, results, total
from tests.simserver import SimServer


def test_concurrency_cap_is_exact_and_every_task_is_recorded(tmp_path: Path,
                                                             sim_server: Callable[..., SimServer]) -> None:
    sims = [sim_server("m", args=["--latency-ms", "100"]) for _ in range(2)]
    config = model_config(tmp_path / "mc.json", {"m": sims})
    data = dataset(tmp_path / "d.jsonl", [f"q{i}" for i in range(36)])
    run_dir = tmp_path / "run"
    proc = run_ops(["eval", "chat", "--no-analyze", "--dataset", str(data), "--model-config", str(config), "--run-dir",
                    str(run_dir), "--concurrency", "6", "--progress-every", "0.2"])
    assert proc.returncode == 0, proc.stderr
    assert total(sims, "sim_max_requests_in_flight") == 6
    assert all(s.metrics()["sim_max_requests_in_flight"] <= 6 for s in sims)
    assert total(sims, "sim_requests_total") == 36
    records = results(run_dir)
    assert sorted(r["id"] for r in records) == sorted(f"q{i}" for i in range(36))
    assert all(r["status"] == "ok" and r["answer"] for r in records)
    # the console: the banner, one TASK_COMPLETE per task, progress, the result line; all of it also in eval.log,
    # which has the routing table besides (the console with -v)
    assert proc.stdout.splitlines()[:2] == ["ops eval chat on mc: 36 samples, 36 to run (new run)",
                                           f"models called: m [{len(sims)} replicas]"]
    assert proc.stdout.splitlines()[-1].startswith("chat: 36/36 answered, not graded · 36/36 ok · ")
    assert f"m [model] -> 127.0.0.1:{sims[0].port}" not in proc.stdout
    assert f"m [model] -> 127.0.0.1:{sims[0].port}" in (run_dir / "eval.log").read_text()
    assert proc.stdout.count("[TASK_COMPLETE] id=") == 36
    assert "[PROGRESS] done=36 failed=0 in_flight=0" in proc.stdout
    log = (run_dir / "eval.log").read_text()
    assert all(line in log for line in proc.stdout.splitlines())
    events = model_calls(run_dir)
    assert len(events) == 36
    assert {"role", "model", "replica", "start", "latency", "prompt_tokens", "completion_tokens", "attempts",
            "status"} <= set(events[0])
    assert {e["replica"] for e in events} == {f"127.0.0.1:{s.port}" for s in sims}

    # a second run into the same run dir without --resume is refused; nothing is overwritten
    again = run_ops(["eval", "chat", "--no-analyze", "--dataset", str(data), "--model-config", str(config), "--run-dir",
                     str(run_dir)])
    assert again.returncode == 2
    assert "already has results (36 ok, 0 failed); pass --resume" in again.stderr
    assert len(results(run_dir)) == 36
