"""The pure parts of `ops eval --detach` and the watchdog: slurm time limits and the signal lead, the
sbatch script, the topology's `eval:` settings, the stall threshold, what a stall report says."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from orchestra_ops.client.callctx import current_role, current_task
from orchestra_ops.config.nodes import SlurmSettings
from orchestra_ops.errors import ConfigError, TopologyError
from orchestra_ops.runner.inflight import InFlight
from orchestra_ops.runner.monitor import RunMonitor
from orchestra_ops.runner.progress import Progress
from orchestra_ops.runner.run_events import EventLog, read_events
from orchestra_ops.supervise.detach import (
    DetachRequest,
    eval_slurm_settings,
    sbatch_script,
    signal_lead_s,
    slurm_minutes,
)


@pytest.mark.parametrize(("limit", "minutes"), [("1", 1), ("90", 90), ("2:30", 2.5), ("1:00:00", 60),
                                                 ("2-00", 2880), ("1-2:03", 1563), ("0-0:10:30", 10.5),
                                                 ("infinite", None), ("", None)])
def test_slurm_time_limits_in_minutes(limit: str, minutes: float | None) -> None:
    assert slurm_minutes(limit) == minutes


@pytest.mark.parametrize(("limit", "lead"), [("1", 30), ("5", 150), ("10", 300), ("48:00:00", 300),
                                             ("0:15", 10), ("infinite", 300)])
def test_the_signal_comes_300_s_before_the_limit_or_halfway_through_a_short_one(limit: str, lead: int) -> None:
    assert signal_lead_s(limit) == lead


def test_the_sbatch_script_asks_for_the_signal_and_execs_the_supervisor(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "hle x"
    request = DetachRequest(run_dir=run_dir, eval_args=["eval", "hle", "--dataset", "d; rm -rf ~"], mode="slurm",
                            max_restarts=3, notify="mail me", cwd=tmp_path,
                            slurm=SlurmSettings(partition="cpu", time="48:00:00", account="lab", mem="8G",
                                                extra_args=["--constraint=intel"]))
    lines = sbatch_script(request).splitlines()
    assert lines[:10] == ["#!/bin/bash", "#SBATCH --job-name=ops-eval-hle_x",
                          f"#SBATCH --output={run_dir}/slurm-%j.out", "#SBATCH --open-mode=append",
                          "#SBATCH --requeue", "#SBATCH --signal=B:TERM@300", "#SBATCH --time=48:00:00",
                          "#SBATCH --nodes=1", "#SBATCH --ntasks=1", f"#SBATCH --chdir={tmp_path}"]
    assert lines[10:14] == ["#SBATCH --partition=cpu", "#SBATCH --account=lab", "#SBATCH --mem=8G",
                            "#SBATCH --constraint=intel"]
    assert lines[-1].startswith("exec ") and lines[-1].endswith(
        f"_supervise --run-dir '{run_dir}' --mode slurm --max-restarts 3 --backoff 5 --notify 'mail me' "
        "-- eval hle --dataset 'd; rm -rf ~'")
    with pytest.raises(ConfigError, match=r"eval\.slurm\.gpus: 2: the eval job is CPU only"):
        sbatch_script(DetachRequest(run_dir=run_dir, eval_args=["eval", "hle"], slurm=SlurmSettings(gpus=2)))


def test_eval_settings_come_from_the_topology_and_walltime_overrides_the_time(tmp_path: Path) -> None:
    topology = tmp_path / "t.yaml"
    topology.write_text("name: t\nnodes: {cpu: {host: localhost}}\n"
                        "eval: {slurm: {partition: long, time: \"7-00:00:00\", account: lab}}\n")
    assert eval_slurm_settings(str(topology), None) == SlurmSettings(partition="long", time="7-00:00:00",
                                                                     account="lab")
    assert eval_slurm_settings(str(topology), "4:00:00").time == "4:00:00"
    assert eval_slurm_settings(None, None) == SlurmSettings()
    with pytest.raises(ConfigError, match="--walltime 4:00:00:00"):
        eval_slurm_settings(None, "4:00:00:00")
    topology.write_text("name: t\nnodes: {cpu: {host: localhost}}\neval: {slurm: {partiton: long}}\n")
    with pytest.raises(TopologyError, match=r"t\.yaml:3: eval\.slurm\.partiton"):
        eval_slurm_settings(str(topology), None)
    topology.write_text("name: t\nnodes: {cpu: {host: localhost}}\neval: {slurm: {gpus: 1}}\n")
    with pytest.raises(TopologyError, match=r"t\.yaml:3: eval\.slurm: .*gpus: 1: the eval job is CPU only"):
        eval_slurm_settings(str(topology), None)


def _monitor(tmp_path: Path, stall_after_s: float | None = None) -> RunMonitor:
    progress = Progress(total=10)
    return RunMonitor(tmp_path, progress, InFlight(), EventLog(tmp_path), lambda: (0, 0, 10),
                      stall_after_s=stall_after_s)


def test_the_stall_threshold_is_the_larger_of_600_s_and_5x_the_p99_task_time(tmp_path: Path) -> None:
    monitor = _monitor(tmp_path)
    assert monitor.stall_threshold_s() == 600
    for _ in range(100):
        monitor.task_finished(30.0)
    assert monitor.stall_threshold_s() == 600
    for _ in range(10):
        monitor.task_finished(500.0)
    assert monitor.stall_threshold_s() == 2500  # the p99 of these 110 tasks is 500 s
    assert _monitor(tmp_path, stall_after_s=42).stall_threshold_s() == 42


def test_a_stall_report_names_each_task_the_call_it_waits_on_and_the_replica(tmp_path: Path) -> None:
    monitor = _monitor(tmp_path, stall_after_s=0.01)
    monitor.progress.in_flight = 2
    for task, role in (("q1", "judge"), ("q2", None)):
        monitor.inflight.task_started(task)
        current_task.set(task)
        current_role.set(role)
        if role:
            monitor.inflight.call_started("10.0.0.5:1820", "http://10.0.0.5:1820/v1/chat/completions")
    time.sleep(0.05)
    lines = monitor.tick()
    assert lines[0].startswith("[STALL] no task has finished for 0 s (stall threshold 0 s); 2 task(s) in flight:")
    assert lines[1].startswith("[STALL]   task q1: running 0 s, waiting on judge on 10.0.0.5:1820 "
                               "(http://10.0.0.5:1820/v1/chat/completions) for 0 s")
    assert lines[2].startswith("[STALL]   task q2: running 0 s, no call in flight")
    assert monitor.tick() == []  # one report per stall
    (event,) = read_events(tmp_path)
    assert event["event"] == "stall" and [t["task"] for t in event["tasks"]] == ["q1", "q2"]
    assert [(c["role"], c["replica"]) for c in event["tasks"][0]["calls"]] == [("judge", "10.0.0.5:1820")]
    monitor.task_finished(1.0)
    monitor.progress.in_flight = 0
    assert monitor.tick() == []
    assert json.loads((tmp_path / "live.json").read_text())["state"] == "running"
