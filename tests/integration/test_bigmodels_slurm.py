"""Ray inside one slurm job on the dev cluster: `ray start --head` in the job, the gate counting its node,
then the server (`vllm serve --distributed-executor-backend ray`, the sim standing in: see tests/raystandin.py),
and `ops down` (scancel) leaving no Ray process and no port behind.

The dev cluster has one slurm node, so the job's Ray cluster is one node (a one-host model with `ray:`). A
job of several nodes (`slurm: {nodes: N}`: workers started with srun on the other nodes) is planned and its
script rendered and syntax-checked in tests/unit/test_parallel_topology.py; it cannot run on one node.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import psutil
import pytest

from orchestra_ops.config.parallel import RaySettings, ray_ports
from orchestra_ops.core.procs import listeners
from tests.helpers import REPO
from tests.integration.cluster_fixtures import ClusterHarness, cluster_fixture, harness
from tests.ports import free_port_block
from tests.raystandin import RAY_VENV, standin

cluster = cluster_fixture(slurm=True, sshd=False)
__all__ = ["cluster", "harness"]

# slurm only (not vllm): it starts no vLLM server (the stand-in serves; the job runs vLLM's argv parser, as every
# slurm fleet's does), and the slurm group keeps it off the dev cluster beside another (tests/xdist_groups.py)
pytestmark = [
    pytest.mark.slurm,
    pytest.mark.timeout(900),
    pytest.mark.skipif(not os.access(RAY_VENV / "bin" / "ray", os.X_OK),
                       reason="needs .venv-ray (make setup-ray: ray beside the CPU build of vLLM)"),
]


def _ray_processes(ports: list[int]) -> list[psutil.Process]:
    """Every process of this machine whose command line names one of the Ray ports (gcs_server, raylet, …)."""
    marks = {f"={port}" for port in ports} | {f" {port}" for port in ports}
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        line = " ".join(proc.info["cmdline"] or [])
        if any(mark in line for mark in marks) and ("ray" in line):
            found.append(proc)
    return found


def test_ray_bring_up_inside_one_job_and_a_clean_down(harness: ClusterHarness) -> None:
    h = harness
    vllm = standin(h.cwd)
    ray_port = free_port_block(2 + 6 + 8)
    port = free_port_block(1)
    node = {**h.slurm_node(gpus=0), "vllm_command": [str(vllm)]}
    model = {"model": str(REPO / ".tiny-model" / "model"), "served_model_name": "tiny", "node": "job",
             "gpus_per_replica": 0, "port": port, "ray": {"port": ray_port, "worker_ports": 8},
             "engine_args": ["--dtype", "float32", "--enforce-eager"]}
    topo = h.topology("rayjob", {"job": node}, {"big": model}, ready_timeout_s=600)
    up = h.ops("up", str(topo), timeout=800)
    assert up.returncode == 0, up.stderr + up.stdout
    state = h.state("rayjob")
    assert [(p["name"], p["role"], p["backend"]) for p in state["processes"]] == [
        ("big/ray0", "ray-head", "slurm"), ("big/0", "server", "slurm")]
    job_log = Path(state["nodes"][0]["handle"]["job_log"]).read_text()
    assert "ops-job: vllm-check big/0" in job_log and '"ok": true' in job_log  # real vLLM parsed the argv
    assert "ops-job: started big/ray0" in job_log and "ops-job: started big/0" in job_log
    log = Path(state["processes"][1]["log"]).read_text()
    assert "ops-ray-gate: 1 of 1 Ray nodes joined" in log
    assert log.index("ops-ray-gate: 1 of 1") < log.index("vllm stand-in: serve")
    assert h.endpoints("rayjob") == {"tiny": [{"ip_addr": state["nodes"][0]["host"], "port": port}]}

    planned = ray_ports(RaySettings(port=ray_port, worker_ports=8), 0, 1).all()
    ray_procs = _ray_processes(planned)
    assert {p.name() for p in ray_procs} >= {"gcs_server", "raylet"}, [p.name() for p in ray_procs]

    down = h.ops("down", "rayjob", timeout=300)
    assert down.returncode == 0, down.stderr + down.stdout
    deadline = time.monotonic() + 30
    while [p for p in ray_procs if p.is_running() and p.status() != psutil.STATUS_ZOMBIE] \
            and time.monotonic() < deadline:
        time.sleep(0.5)
    assert [p.pid for p in ray_procs if p.is_running() and p.status() != psutil.STATUS_ZOMBIE] == []
    assert listeners([port, *planned]) == {}
    assert h.cluster.jobs() == []
    assert json.loads((h.home / "rayjob" / "state.json").read_text())["status"] == "down"
