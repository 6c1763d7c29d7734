"""The sbatch script: golden text for the example topology, then what the script does when bash runs it
(slurm itself is exercised in tests/integration/test_slurm_backend.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from orchestra_ops.config.topology import SlurmSettings
from orchestra_ops.fleet.backends.sbatch import Replica, SbatchJob, parse_exit, render_sbatch, sbatch_lines

GOLDEN = Path(__file__).parent / "golden" / "slurm_example_gpu8.sbatch"


def _example_job() -> SbatchJob:
    """The shape of topologies/slurm_example.yaml's gpu8 node, written out (so plan changes do not move it)."""
    settings = SlurmSettings(partition="gpu", gpus=8, time="4:00:00", account="lab", cpus_per_task=32, mem="400G")
    replicas = tuple(
        Replica(f"answer/{i}", f"/state/slurm-example/logs/answer-{i}.log", (i,),
                {"CUDA_VISIBLE_DEVICES": str(i), "PYTHONUNBUFFERED": "1",
                 "VLLM_CACHE_ROOT": f"/tmp/orchestra-ops/vllm-cache/slurm-example/answer-{i}"},
                ["vllm", "serve", "Qwen/Qwen3-32B-FP8", "--host", "0.0.0.0", "--port", str(1820 + i),
                 "--gpu-memory-utilization", "0.9", "--max-model-len", "32768"])
        for i in range(2))
    search = Replica("search/0", "/state/slurm-example/logs/search-0.log", (2, 3),
                     {"CUDA_VISIBLE_DEVICES": "2,3", "PYTHONUNBUFFERED": "1", "HF_HOME": "/data/hf cache"},
                     ["vllm", "serve", "openai/gpt-oss-20b", "--port", "1840", "--tensor-parallel-size", "2"])
    return SbatchJob(topology="slurm-example", node="gpu8", settings=settings, nofile=65536,
                     job_log="/state/slurm-example/logs/gpu8.slurm.log", workdir="/work", replicas=(*replicas, search))


def test_the_example_script_is_exactly_the_golden_file() -> None:
    text = render_sbatch(_example_job())
    if os.environ.get("OPS_UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text(), "rendering changed; rerun with OPS_UPDATE_GOLDEN=1 and review the diff"


def test_sbatch_lines_come_from_the_topology_in_a_fixed_order() -> None:
    settings = SlurmSettings(partition="gpu", gpus=4, time="1-00:00:00", account="lab", qos="high", exclusive=True,
                             cpus_per_task=16, mem="200G", extra_args=["--constraint=a100", "--nice=10"])
    job = SbatchJob(topology="t", node="n", settings=settings, nofile=1024, job_log="/l/n.slurm.log", workdir="/w",
                    replicas=())
    assert sbatch_lines(job) == [
        "#SBATCH --job-name=ops-t-n", "#SBATCH --output=/l/n.slurm.log", "#SBATCH --open-mode=append",
        "#SBATCH --chdir=/w", "#SBATCH --nodes=1", "#SBATCH --ntasks=1", "#SBATCH --partition=gpu",
        "#SBATCH --gres=gpu:4", "#SBATCH --time=1-00:00:00", "#SBATCH --account=lab", "#SBATCH --qos=high",
        "#SBATCH --exclusive", "#SBATCH --cpus-per-task=16", "#SBATCH --mem=200G", "#SBATCH --constraint=a100",
        "#SBATCH --nice=10"]
    bare = SbatchJob(topology="t", node="n", settings=SlurmSettings(), nofile=1024, job_log="/l", workdir="/w",
                     replicas=())
    assert [line for line in sbatch_lines(bare) if "partition" in line or "gres" in line] == []


def test_a_hostile_value_stays_one_argument(tmp_path: Path) -> None:
    evil = "x'; touch " + str(tmp_path / "pwned") + "; echo '"
    job = SbatchJob(topology="t", node="n", settings=SlurmSettings(), nofile=1024, job_log=str(tmp_path / "job.log"),
                    workdir=str(tmp_path), replicas=(
                        Replica("r/0", str(tmp_path / "r.log"), (), {"V": evil}, ["printf", "%s|%s\n", evil, "$V"]),))
    result = _run(tmp_path, job)
    assert result.returncode == 0
    assert not (tmp_path / "pwned").exists()
    assert (tmp_path / "r.log").read_text() == f"{evil}|$V\n"


def _run(tmp_path: Path, job: SbatchJob, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "job.sbatch"
    script.write_text(render_sbatch(job))
    return subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "SLURM_JOB_ID": "77", **(env or {})})


def test_the_script_pins_each_replica_within_the_allocation_and_reports_exits(tmp_path: Path) -> None:
    show = ["bash", "-c", 'echo "cvd=$CUDA_VISIBLE_DEVICES mode=$MODE"; exit $CODE']
    replicas = (
        Replica("a/0", str(tmp_path / "a-0.log"), (0,), {"MODE": "x y", "CODE": "0"}, show),
        Replica("a/1", str(tmp_path / "a-1.log"), (1, 2), {"MODE": "z", "CODE": "3",
                                                             "CUDA_VISIBLE_DEVICES": "1,2"}, show),
        Replica("cpu", str(tmp_path / "cpu.log"), (), {"MODE": "c", "CODE": "0"}, show),
        Replica("gone/0", str(tmp_path / "gone.log"), (3,), {}, ["no-such-command-here", "--flag"]),
    )
    job = SbatchJob(topology="t", node="n", settings=SlurmSettings(gpus=4), nofile=10**9,
                    job_log=str(tmp_path / "job.log"), workdir=str(tmp_path), replicas=replicas)
    result = _run(tmp_path, job, {"CUDA_VISIBLE_DEVICES": "4,5,6,7"})  # the devices slurm gave the job
    assert result.returncode == 0, result.stderr
    out = result.stdout.splitlines()
    assert out[0] == f"ops-job: job 77 on {os.uname().nodename} with CUDA_VISIBLE_DEVICES=4,5,6,7"
    assert out[1].startswith("ops-job: ulimit_nofile 1000000000 is above the hard limit ")
    assert sorted(line for line in out if "started" in line) == [
        "ops-job: started a/0 with CUDA_VISIBLE_DEVICES=4", "ops-job: started a/1 with CUDA_VISIBLE_DEVICES=5,6",
        "ops-job: started cpu with CUDA_VISIBLE_DEVICES="]
    exits = sorted(filter(None, map(parse_exit, out)))
    assert exits == [("a/0", 0), ("a/1", 3), ("cpu", 0), ("gone/0", 127)]
    assert "ops-job: gone/0: command not found: no-such-command-here" in out
    assert out[-1] == "ops-job: every process exited"
    assert (tmp_path / "a-0.log").read_text() == "cvd=4 mode=x y\n"
    assert (tmp_path / "a-1.log").read_text() == "cvd=5,6 mode=z\n"
    assert (tmp_path / "cpu.log").read_text() == "cvd= mode=c\n"
    assert (tmp_path / "gone.log").read_text() == "ops-job: gone/0: command not found: no-such-command-here\n"


def test_at_scancel_the_job_ends_only_after_its_replicas_have(tmp_path: Path) -> None:
    """slurm SIGTERMs every process of the job; the script must outlive a replica that takes time to stop."""
    slow = ["bash", "-c", "trap 'sleep 1; echo stopped cleanly; exit 0' TERM; echo up; sleep 60 & wait"]
    job = SbatchJob(topology="t", node="n", settings=SlurmSettings(), nofile=1024, job_log=str(tmp_path / "j.log"),
                    workdir=str(tmp_path), replicas=(Replica("s/0", str(tmp_path / "s.log"), (), {}, slow),))
    script = tmp_path / "job.sbatch"
    script.write_text(render_sbatch(job))
    proc = subprocess.Popen(["bash", str(script)], stdout=subprocess.PIPE, text=True, start_new_session=True)
    log, deadline = tmp_path / "s.log", time.monotonic() + 30
    while not (log.exists() and "up" in log.read_text()):
        assert time.monotonic() < deadline, "the replica never started"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGTERM)  # what slurm does at scancel: every process of the job
    out, _ = proc.communicate(timeout=30)
    assert (tmp_path / "s.log").read_text() == "up\nstopped cleanly\n"
    assert out.splitlines()[-2:] == ["ops-job: exited s/0 status=0", "ops-job: every process exited"]


def _fake_vllm(tmp_path: Path, answer: str) -> Path:
    """A `vllm` console script whose shebang names a 'python' that prints `answer` (the check's reply)."""
    python = tmp_path / "fake-python"
    python.write_text(f"#!/bin/sh\necho 'noise on stdout'\necho 'OPS_VLLM_CHECK {answer}'\n")
    python.chmod(0o755)
    vllm = tmp_path / "vllm"
    vllm.write_text(f"#!{python}\n")
    vllm.chmod(0o755)
    return vllm


def test_a_refused_vllm_command_ends_the_job_before_anything_starts(tmp_path: Path) -> None:
    from orchestra_ops.fleet.argv_check import check_argv

    vllm = _fake_vllm(tmp_path, '{"ok": false, "version": "0.32.0", "error": "argument --dtype: invalid choice"}')
    argv = [str(vllm), "serve", "m", "--dtype", "float13"]
    log = tmp_path / "m-0.log"
    job = SbatchJob(topology="t", node="n", settings=SlurmSettings(), nofile=1024, job_log=str(tmp_path / "job.log"),
                    workdir=str(tmp_path), replicas=(
                        Replica("m/0", str(log), (), {"VLLM_X": "1"}, argv, check_argv(argv)),
                        Replica("m/1", str(tmp_path / "m-1.log"), (), {}, argv)))
    script = tmp_path / "job.sbatch"
    script.write_text(render_sbatch(job))
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2
    lines = done.stdout.splitlines()
    assert 'ops-job: vllm-check m/0 {"ok": false, "version": "0.32.0", "error": "argument --dtype: invalid choice"}' \
        in lines
    assert any(line.startswith("ops-job: m/0: vLLM on ") and line.endswith(
        'refuses its command: {"ok": false, "version": "0.32.0", "error": "argument --dtype: invalid choice"}')
        for line in lines)
    assert not any(line.startswith("ops-job: started") for line in lines)  # nothing started
    assert not log.exists()


def test_an_accepted_vllm_command_starts_the_replicas(tmp_path: Path) -> None:
    from orchestra_ops.fleet.argv_check import check_argv

    vllm = _fake_vllm(tmp_path, '{"ok": true, "version": "0.32.0", "error": null}')
    argv = [str(vllm), "serve", "m"]
    job = SbatchJob(topology="t", node="n", settings=SlurmSettings(), nofile=1024, job_log=str(tmp_path / "job.log"),
                    workdir=str(tmp_path), replicas=(Replica("m/0", str(tmp_path / "m-0.log"), (), {}, argv,
                                                             check_argv(argv)),))
    script = tmp_path / "job.sbatch"
    script.write_text(render_sbatch(job))
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert 'ops-job: vllm-check m/0 {"ok": true, "version": "0.32.0", "error": null}' in lines
    assert "ops-job: exited m/0 status=0" in lines
