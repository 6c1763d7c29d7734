"""The slurm backend against a real slurmctld + slurmd (4 fake GPUs) and munged, started by this module.

Replicas are simulated engines run by the sbatch job on the (only) node, so what each sees
(CUDA_VISIBLE_DEVICES, open ports) can be checked on this machine.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time

from orchestra_ops.core.procs import listeners
from tests.integration.cluster_fixtures import ClusterHarness, alive, cluster_fixture, harness

cluster = cluster_fixture(slurm=True, sshd=False)
__all__ = ["cluster", "harness"]


def _squeue_all(h: ClusterHarness, job: str) -> str:
    out = subprocess.run(["squeue", "-h", "-t", "all", "-j", job, "-o", "%T"], capture_output=True, text=True,
                         env={**os.environ, **h.env}, check=False)
    return out.stdout.strip()


def test_four_replicas_each_on_its_own_gpu_then_down_leaves_nothing(harness: ClusterHarness) -> None:
    h, node = harness, harness.cluster.node
    topo = h.topology("s4", {"gpu": h.slurm_node(gpus=4)},
                      {"m": h.sim("gpu", replicas=4, gpus_per_replica=1)})
    result = h.ops("up", str(topo))
    assert result.returncode == 0, result.stderr
    state = h.state("s4")
    job = state["nodes"][0]["handle"]["job_id"]
    assert [(n["name"], n["backend"], n["host"]) for n in state["nodes"]] == [("gpu", "slurm", node)]
    ports = [p["port"] for p in state["processes"]]
    model = state["processes"][0]["served_model_name"]
    assert h.endpoints("s4") == {model: [{"ip_addr": node, "port": p} for p in ports]}
    assert {p["host"] for p in state["processes"]} == {node}

    servers = h.servers(ports)
    assert sorted(servers) == ports
    devices = sorted(proc.environ()["CUDA_VISIBLE_DEVICES"] for proc in servers.values())
    assert devices == ["0", "1", "2", "3"]
    job_log = (h.home / "s4" / "logs" / "gpu.slurm.log").read_text()
    assert f"ops-job: job {job} on {node} with CUDA_VISIBLE_DEVICES=0,1,2,3" in job_log
    assert all(f"ops-job: started m/{i} with CUDA_VISIBLE_DEVICES={i}" in job_log for i in range(4))
    script = (h.home / "s4" / "slurm" / "gpu.sbatch").read_text()
    assert "#SBATCH --gres=gpu:4" in script and "#SBATCH --open-mode=append" in script

    health = h.ops("health", "--json")
    assert health.returncode == 0, health.stderr
    report = json.loads(health.stdout)
    assert [(p["state"], p["host"], p["backend"]) for p in report["processes"]] == [("READY", node, "slurm")] * 4
    assert report["nodes"] == [{"name": "gpu", "backend": "slurm", "host": node,
                                "state": f"slurm job {job} RUNNING", "problem": None}]
    status = json.loads(h.ops("status", "--json").stdout)
    assert [(p["alive"], p["state"], p["pid"]) for p in status["processes"]] == [(True, "running", None)] * 4
    logs = h.ops("logs", "m/2", "-n", "5")
    assert logs.returncode == 0 and f"simllm serving on http://{h.cluster.node_address}:{ports[2]}" in logs.stdout

    down = h.ops("down")
    assert down.returncode == 0, down.stderr
    assert "s4: 4 stopped; verified: no process, port or slurm job left" in down.stderr
    assert h.cluster.jobs() == []
    assert _squeue_all(h, job) == "CANCELLED"
    assert alive(list(servers.values())) == []
    assert listeners(ports) == {}
    assert h.state("s4")["status"] == "down"


def test_more_gpus_than_the_node_has_is_refused_at_once(harness: ClusterHarness) -> None:
    h = harness
    topo = h.topology("big", {"gpu": h.slurm_node(gpus=8), "cpu": h.local_node()},
                      {"m": h.sim("gpu", replicas=2, gpus_per_replica=4), "c": h.sim("cpu", replicas=1)})
    result = h.ops("up", str(topo))
    assert result.returncode == 3
    assert ("error: node gpu (slurm): sbatch refused the job: Batch job submission failed: Requested node "
            "configuration is not available (asked for: partition dev, --gres=gpu:8;") in result.stderr
    assert "stopped what had started on cpu" in result.stderr  # the local node had launched in parallel
    state = h.state("big")
    assert state["status"] == "down"
    assert [r for r in state["processes"] if r["backend"] == "local"]  # it did start, then was stopped
    assert listeners([r["port"] for r in state["processes"]]) == {}
    assert h.cluster.jobs() == []


def test_a_job_that_cannot_start_shows_its_pending_reason_until_the_timeout(harness: ClusterHarness) -> None:
    h = harness
    hold = subprocess.run(["sbatch", "--parsable", "--gres=gpu:4", "-o", "/dev/null", "--wrap", "sleep 600"],
                          capture_output=True, text=True, env={**os.environ, **h.env}, check=True)
    holder = hold.stdout.strip()
    try:
        topo = h.topology("wait", {"gpu": h.slurm_node(gpus=2)}, {"m": h.sim("gpu", replicas=2, gpus_per_replica=1)})
        up = h.popen("up", str(topo), "--timeout", "25")
        try:
            pending = None
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                if (h.home / "wait" / "state.json").exists():
                    status = json.loads(h.ops("status", "wait", "--json").stdout)
                    states = {p["state"] for p in status["processes"]}
                    if any("(Resources)" in s for s in states):
                        pending = status
                        break
                time.sleep(0.5)
            assert pending is not None, "the job never showed PENDING (Resources)"
            job = h.state("wait")["nodes"][0]["handle"]["job_id"]
            assert [(p["alive"], p["state"], p["host"]) for p in pending["processes"]] == [
                (False, f"slurm job {job} PENDING (Resources)", None)] * 2
            health = h.ops("health", "wait", "--json")
            assert health.returncode == 1
            assert [(p["state"], p["detail"]) for p in json.loads(health.stdout)["processes"]] == [
                ("PENDING", f"slurm job {job} PENDING (Resources)")] * 2
            _, err = up.communicate(timeout=120)
        finally:
            if up.poll() is None:
                up.kill()
                up.wait()
        assert up.returncode == 3
        assert f"[gpu: slurm job {job} PENDING (Resources)]" in err  # the progress line said so
        assert "error: 2 processes not serving after 25 s:" in err
        assert f"m/0 (node gpu, no host yet): slurm job {job} PENDING (Resources)" in err
        assert h.cluster.jobs() == [holder]  # ours was cancelled, the one holding the GPUs was not
    finally:
        subprocess.run(["scancel", holder], env={**os.environ, **h.env}, check=False)


def test_a_replica_that_crashes_fails_fast_with_its_log_tail(harness: ClusterHarness) -> None:
    h = harness
    topo = h.topology("crash", {"gpu": h.slurm_node(gpus=4)},
                      {"good": h.sim("gpu", replicas=2, gpus_per_replica=1, sim={"startup_delay_s": 600}),
                       "bad": h.sim("gpu", replicas=1, gpus_per_replica=1, engine_args=["--no-such-flag"])})
    started = time.monotonic()
    result = h.ops("up", str(topo), "--timeout", "600")
    assert result.returncode == 3
    assert time.monotonic() - started < 300  # it failed on the crash, not at the 600 s timeout
    assert "error: bad/0 exited with status 2 before it was serving (node gpu" in result.stderr
    assert "Error: No such option '--no-such-flag'." in result.stderr  # the tail of bad/0's log
    assert "reproduce:" in result.stderr and "fleet stopped" in result.stderr
    assert h.cluster.jobs() == []
    ports = [r["port"] for r in h.state("crash")["processes"]]
    assert listeners(ports) == {}


def test_a_job_cancelled_while_waiting_fails_up_at_once(harness: ClusterHarness) -> None:
    h = harness
    topo = h.topology("gone", {"gpu": h.slurm_node(gpus=1)},
                      {"m": h.sim("gpu", replicas=1, gpus_per_replica=1, sim={"startup_delay_s": 600})})
    up = h.popen("up", str(topo), "--timeout", "600")
    try:
        job = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and job is None:
            if (h.home / "gone" / "state.json").exists():
                nodes = h.state("gone")["nodes"]
                if nodes and nodes[0]["host"]:
                    job = nodes[0]["handle"]["job_id"]
            time.sleep(0.2)
        assert job is not None, "the job never started"
        subprocess.run(["scancel", job], env={**os.environ, **h.env}, check=True)
        _, err = up.communicate(timeout=120)
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
    assert up.returncode == 3
    assert re.search(rf"error: node gpu: slurm job {job} on \S+: CANCELLED AT \S+ while 1 processes were not "
                     r"serving yet", err), err
    assert "slurmstepd" in err  # the job log's tail
    assert h.cluster.jobs() == []


def test_status_after_down_still_reads(harness: ClusterHarness) -> None:
    h = harness
    topo = h.topology("brief", {"gpu": h.slurm_node(gpus=1)}, {"m": h.sim("gpu", replicas=1, gpus_per_replica=1)})
    assert h.ops("up", str(topo)).returncode == 0
    assert h.ops("down").returncode == 0
    status = h.ops("status", "brief", "--json")
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    assert data["status"] == "down"
    assert [(p["alive"], p["state"]) for p in data["processes"]] == [(False, "exited (status 0)")]  # at SIGTERM
    assert data["nodes"][0]["state"].endswith("CANCELLED")


def test_no_wait_then_health_writes_the_endpoints_once_the_job_runs(harness: ClusterHarness) -> None:
    h, node = harness, harness.cluster.node
    topo = h.topology("later", {"gpu": h.slurm_node(gpus=1)}, {"m": h.sim("gpu", replicas=1, gpus_per_replica=1)})
    result = h.ops("up", str(topo), "--no-wait")
    assert result.returncode == 0, result.stderr
    endpoints_file = h.home / "later" / "model_config.json"
    if result.stdout.strip():  # the job may already run when `ops up` looks once before returning
        assert result.stdout.strip() == str(endpoints_file)
    else:
        assert "warning: no endpoints file yet: nodes gpu have no host until their slurm jobs run" in result.stderr
        assert not endpoints_file.exists()
    deadline = time.monotonic() + 120
    ready = False
    while time.monotonic() < deadline and not ready:
        health = h.ops("health", "later", "--json")
        ready = health.returncode == 0
        time.sleep(0.5)
    assert ready
    port = h.state("later")["processes"][0]["port"]
    assert json.loads(endpoints_file.read_text()) == {h.state("later")["processes"][0]["endpoint_key"]: [
        {"ip_addr": node, "port": port}]}
    assert h.state("later")["endpoints_file"] == str(endpoints_file)
    assert h.ops("down").returncode == 0
