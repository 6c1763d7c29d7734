"""`ops runs`, `ops stop` and `ops attach` believe the run that is live: a detached run stopped, then resumed
in the foreground, is `running` (its eval's pid), `ops stop` stops that eval, and a foreground resume to
the end is `finished`. A damaged run.json or live.json is one `unreadable` row that hides no other run;
a slurm controller that cannot be asked leaves the recorded state, marked unconfirmed, never `crashed`.
Real sims, real `ops` subprocesses, real tmux; the real `squeue` without a configuration."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.chaos.supervise_fixtures import (
    detached_fixture,  # noqa: F401 (the `detached` fixture)
    run_info,
    runs_json,
    wait_until,
)
from tests.helpers import OPS, REPO, kill_tree, run_ops
from tests.integration.eval_fixtures import dataset, model_config, results
from tests.simserver import SimServer

Detach = Callable[..., subprocess.CompletedProcess[str]]


def test_a_foreground_resume_of_a_stopped_detached_run_is_running_stoppable_then_finished(
        tmp_path: Path, sim_server: Callable[..., SimServer], detached: Detach) -> None:
    sim = sim_server("m", args=["--latency-ms", "100"])
    runs = tmp_path / "runs"
    run_dir = runs / "fg"
    args = ["eval", "chat", "--no-analyze", "--model-config", str(model_config(tmp_path / "mc.json", {"m": [sim]})),
            "--dataset", str(dataset(tmp_path / "d.jsonl", [f"s{i}" for i in range(1000)])), "--progress-every", "0.3"]
    assert detached([*args, "--concurrency", "2"], run_dir).returncode == 0
    wait_until(lambda: (run_dir / "results.jsonl").exists() and len(results(run_dir)) >= 10, "10 results")
    first = run_ops(["stop", str(run_dir)])
    assert first.returncode == 0 and f"{run_dir}: stopped (" in first.stdout, first.stderr

    resume = [*OPS, *args, "--run-dir", str(run_dir), "--resume"]
    proc = subprocess.Popen([*resume, "--concurrency", "2"], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        row = wait_until(lambda: (r := runs_json(runs)["fg"])["state"] == "running" and r, "the resume runs")
        assert row["where"] == f"{proc.pid}@{socket.gethostname()}" and row["total"] == 1000
        done = len(results(run_dir))
        wait_until(lambda: len(results(run_dir)) > done + 5, "the resume finishes tasks")
        second = run_ops(["stop", str(run_dir)])  # today: "not running"
        assert second.returncode == 0, second.stderr
        assert f"{run_dir}: stopped (" in second.stdout
        assert proc.wait(timeout=60) == 130  # that eval got the clean stop (SIGTERM): no new tasks, exit 130
    finally:
        kill_tree(proc.pid)
    row = runs_json(runs)["fg"]
    assert row["state"] == "stopped" and row["where"] == f"{proc.pid}@{socket.gethostname()}"
    assert run_info(run_dir)["supervisor"]["state"] == "stopped"  # the supervisor's record is left as it was

    to_the_end = subprocess.run([*resume, "--concurrency", "32"], cwd=REPO, capture_output=True, text=True,
                                timeout=300, check=False)
    assert to_the_end.returncode == 0, to_the_end.stderr
    row = runs_json(runs)["fg"]
    assert (row["state"], row["done"], row["failed"], row["total"]) == ("finished", 1000, 0, 1000)
    attach = run_ops(["attach", str(run_dir)])
    assert attach.returncode == 0 and attach.stdout.strip().endswith("run finished: 1000 ok, 0 failed")
    again = run_ops(["stop", str(run_dir)])
    assert again.returncode == 2 and "is not running (state finished)" in again.stderr


def test_an_unreadable_run_is_listed_as_such_and_hides_no_other(
        tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("m", args=["--latency-ms", "1"])
    runs = tmp_path / "runs"
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    for name in ("a-good", "b-bad-run-json", "c-bad-live-json"):
        done = run_ops(["eval", "chat", "--no-analyze", "--model-config", str(config), "--dataset",
                        str(dataset(tmp_path / "d.jsonl", ["x", "y"])), "--run-dir", str(runs / name)])
        assert done.returncode == 0, done.stderr
    (runs / "b-bad-run-json" / "run.json").write_text('{"suite": "chat", "mod')  # cut mid-write
    (runs / "c-bad-live-json" / "live.json").write_text("[1, 2]")

    listed = run_ops(["runs", "--root", str(runs), "--json"])
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert (rows["a-good"]["state"], rows["a-good"]["done"]) == ("finished", 2)
    bad = rows["b-bad-run-json"]
    assert bad["state"] == "unreadable" and bad["reason"].startswith(f"{runs / 'b-bad-run-json' / 'run.json'}: "
                                                                     "unreadable (")
    assert rows["c-bad-live-json"]["state"] == "unreadable"
    assert rows["c-bad-live-json"]["reason"] == f"{runs / 'c-bad-live-json' / 'live.json'}: not a JSON object"
    table = run_ops(["runs", "--root", str(runs)])
    assert table.returncode == 0 and "Traceback" not in table.stdout + table.stderr
    assert f"b-bad-run-json: unreadable: {bad['reason']}" in table.stdout and "a-good" in table.stdout
    stop = run_ops(["stop", str(runs / "b-bad-run-json")])
    assert stop.returncode == 2 and stop.stderr.strip() == f"error: {bad['reason']}"


def test_a_slurm_controller_that_cannot_be_asked_leaves_the_state_unconfirmed(tmp_path: Path) -> None:
    """A slurm configuration squeue cannot use (the real squeue refuses it at once): the recorded `running`,
    unconfirmed, never `crashed`. (tests/integration/test_detach_slurm.py: a live job, the controller unreachable.)"""
    if shutil.which("squeue") is None:
        pytest.skip("no squeue here")
    run_dir = tmp_path / "runs" / "on-slurm"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({
        "suite": "chat", "topology": "t", "attempts": [{"n": 1}],
        "supervisor": {"mode": "slurm", "job_id": "424242", "state": "running", "restarts": 0, "host": "login1"}}))
    conf = tmp_path / "slurm.conf"
    conf.write_text("this is no slurm configuration\n")
    env = {"SLURM_CONF": str(conf)}
    listed = run_ops(["runs", "--root", str(tmp_path / "runs"), "--json"], env=env)
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    assert (row["state"], row["where"], row["reason"]) == ("running", "job 424242", None)  # not crashed
    assert row["unconfirmed"] == ("`squeue -h` could not ask the slurm controller: squeue: fatal: Unable to process "
                                  "configuration file")
    table = run_ops(["runs", "--root", str(tmp_path / "runs")], env=env)
    assert "running?" in table.stdout
    assert f"on-slurm: running as recorded, not confirmed: {row['unconfirmed']}" in table.stdout
    stop = run_ops(["stop", str(run_dir)], env=env)  # nothing can be signalled without the controller
    assert stop.returncode == 3 and stop.stderr.strip() == f"error: {row['unconfirmed']}"
    assert not (run_dir / "stop.request").exists()  # no stop is left pending for a later signal to look like
