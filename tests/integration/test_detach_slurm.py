"""`ops eval --detach slurm` on the dev cluster (real slurmctld/slurmd): a job with a 1-minute time limit
is signalled before it (`--signal=B:TERM@30`: half the limit), stops taking tasks, flushes, hands the run
to a successor job (`--dependency=afterany`), which resumes and finishes: every id exactly once, every
attempt in run.json. About 90 s: the slurm controller checks time limits every 30 s, so an attempt is
signalled 30 to 60 s after it starts."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.supervise_fixtures import events, run_info, runs_json, supervisor_state, wait_until
from tests.helpers import OPS
from tests.integration.cluster_fixtures import ClusterHarness, cluster_fixture, harness
from tests.integration.eval_fixtures import dataset, model_config, results
from tests.simserver import SimServer

cluster = cluster_fixture(slurm=True, sshd=False)
__all__ = ["cluster", "harness"]


@pytest.mark.timeout(900)  # waits up to 420 s for the requeued run (~300 s on a loaded machine), over pytest's 300
def test_a_walltime_signal_requeues_the_job_which_resumes_and_finishes(
        harness: ClusterHarness, tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    h = harness
    sim = sim_server("m", args=["--latency-ms", "500"])
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    ids = [f"s{i}" for i in range(260)]  # 2 in flight x 2/s: ~65 s of work, more than one attempt can do
    data = dataset(tmp_path / "d.jsonl", ids)
    runs = tmp_path / "runs"
    run_dir = runs / "chat-slurm"
    started = h.ops("eval", "chat", "--no-analyze", "--model-config", str(config), "--dataset", str(data),
                    "--run-dir", str(run_dir), "--concurrency", "2", "--progress-every", "1",
                    "--detach", "slurm", "--walltime", "1")
    assert started.returncode == 0, started.stderr
    job = run_info(run_dir)["supervisor"]["job_id"]
    assert f"detached: {run_dir} runs under a supervisor in slurm job {job}" in started.stdout
    script = (run_dir / "eval.sbatch").read_text()
    assert "#SBATCH --signal=B:TERM@30\n" in script and "#SBATCH --time=1\n" in script
    assert "#SBATCH --requeue\n" in script and "--gres" not in script
    try:
        wait_until(lambda: supervisor_state(run_dir) in ("finished", "crashed"), "the run ended", timeout_s=420)
        info = run_info(run_dir)
        assert info["supervisor"]["state"] == "finished", info["supervisor"]
        attempts = info["attempts"]
        assert len(attempts) >= 2
        jobs = [a["job_id"] for a in attempts]
        assert jobs[0] == job and len(set(jobs)) == len(jobs)  # each attempt a job of its own, the first ours
        for attempt in attempts[:-1]:
            assert attempt["outcome"] == "requeue"
            assert attempt["reason"].startswith("SIGTERM before the slurm time limit (exit 130)")
            assert attempt["done_after"] > attempt["done_before"]
        assert attempts[-1]["outcome"] == "finished" and attempts[-1]["resume"] is True
        assert [a["n"] for a in attempts] == list(range(1, len(attempts) + 1))
        assert info["supervisor"]["job_id"] == jobs[-1]
        records = results(run_dir)
        assert Counter(r["id"] for r in records) == Counter(ids) and all(r["status"] == "ok" for r in records)
        requeued = [e for e in events(run_dir) if e["event"] == "requeued"]
        assert [(e["previous_job_id"], e["job_id"]) for e in requeued] == list(itertools.pairwise(jobs))
        assert [e["event"] for e in events(run_dir)][-1] == "finished" and len(events(run_dir)) == len(attempts)
        log = (run_dir / "eval.log").read_text()
        assert f"[SUPERVISOR] attempt 1: SIGTERM before the slurm time limit (exit 130); slurm job {job} ends, " \
               f"job {jobs[1]} continues the run" in log
        assert "stopping: no new tasks" in log
        row = runs_json(runs)["chat-slurm"]
        assert (row["state"], row["done"], row["total"], row["where"]) == ("finished", 260, 260, f"job {jobs[-1]}")
    finally:
        jobs_now = [str(a.get("job_id")) for a in run_info(run_dir).get("attempts", [])] + [job]
        subprocess.run(["scancel", *set(jobs_now)], env={**os.environ, **h.env}, capture_output=True, check=False)


def test_ops_stop_of_a_slurm_run_signals_its_supervisor_and_nothing_continues(
        harness: ClusterHarness, tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    h = harness
    sim = sim_server("m", args=["--latency-ms", "500"])
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    data = dataset(tmp_path / "d.jsonl", [f"s{i}" for i in range(1000)])
    runs = tmp_path / "runs"
    run_dir = runs / "chat-slurm-stop"
    started = h.ops("eval", "chat", "--no-analyze", "--model-config", str(config), "--dataset", str(data),
                    "--run-dir", str(run_dir), "--concurrency", "2", "--detach", "slurm", "--walltime", "30")
    assert started.returncode == 0, started.stderr
    job = run_info(run_dir)["supervisor"]["job_id"]
    try:
        wait_until(lambda: (run_dir / "results.jsonl").exists() and len(results(run_dir)) >= 4, "4 results")
        stopped = h.ops("stop", str(run_dir))
        assert stopped.returncode == 0, stopped.stderr
        assert f"{run_dir}: stopped (" in stopped.stdout
        info = run_info(run_dir)
        assert info["supervisor"]["state"] == "stopped" and info["supervisor"]["job_id"] == job
        (attempt,) = info["attempts"]
        assert (attempt["outcome"], attempt["exit"], attempt["job_id"]) == ("stopped", 130, job)
        assert [e["event"] for e in events(run_dir)] == ["stopped"]
        records = results(run_dir)
        assert 4 <= len(records) < 1000 and len({r["id"] for r in records}) == len(records)
        assert runs_json(runs)["chat-slurm-stop"]["state"] == "stopped"
    finally:
        subprocess.run(["scancel", job], env={**os.environ, **h.env}, capture_output=True, check=False)


def test_a_controller_that_cannot_be_asked_leaves_a_running_job_running_unconfirmed(
        harness: ClusterHarness, tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    """The job runs; `ops runs` with a slurm configuration whose controller never answers (squeue keeps
    retrying past the 10 s `ops runs` gives it) says `running`, unconfirmed, never `crashed`; with the
    real configuration it says `running`, confirmed, on the job's node."""
    h = harness
    sim = sim_server("m", args=["--latency-ms", "500"])
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    data = dataset(tmp_path / "d.jsonl", [f"s{i}" for i in range(1000)])
    runs = tmp_path / "runs"
    run_dir = runs / "chat-slurm-unreachable"
    started = h.ops("eval", "chat", "--no-analyze", "--model-config", str(config), "--dataset", str(data),
                    "--run-dir", str(run_dir), "--concurrency", "2", "--detach", "slurm", "--walltime", "30")
    assert started.returncode == 0, started.stderr
    job = run_info(run_dir)["supervisor"]["job_id"]
    silent = tmp_path / "unreachable-slurm.conf"  # a controller address where nothing answers
    silent.write_text("ClusterName=unreachable\nSlurmctldHost=nowhere(127.0.0.1)\nSlurmctldPort=1\n"
                      "AuthType=auth/none\n")
    try:
        wait_until(lambda: (run_dir / "results.jsonl").exists() and len(results(run_dir)) >= 4, "4 results")
        unasked = subprocess.run([*OPS, "runs", "--root", str(runs), "--json"], cwd=h.cwd, capture_output=True,
                                 text=True, timeout=120, check=False,
                                 env={**os.environ, **h.env, "SLURM_CONF": str(silent)})
        assert unasked.returncode == 0, unasked.stderr
        (row,) = json.loads(unasked.stdout)
        assert (row["state"], row["where"], row["reason"]) == ("running", f"job {job}", None)
        assert row["unconfirmed"] == "`squeue -h` did not answer in 10 s: is slurmctld up?"
        asked = runs_json_with(h, runs)
        assert (asked["state"], asked["unconfirmed"]) == ("running", None)
        assert asked["where"].startswith(f"job {job}@")
    finally:
        subprocess.run(["scancel", job], env={**os.environ, **h.env}, capture_output=True, check=False)


def runs_json_with(h: ClusterHarness, runs: Path) -> dict[str, Any]:
    result = h.ops("runs", "--root", str(runs), "--json")
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(result.stdout)
    return dict(row)
