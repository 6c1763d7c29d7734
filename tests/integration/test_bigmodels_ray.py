"""A model across two hosts through real Ray: a `hosts:` node of this machine and the dev cluster's sshd on
127.0.0.2, pipeline parallel 2, `ops up` to `ops down`. This machine's host binds 127.0.0.3: Ray turns
127.0.0.1 into the machine's outward address (ray/_private/services.py resolve_ip_for_localhost), and the
test keeps every byte on loopback.

The CPU build of vLLM cannot run this mode: its platform has no Ray device key, and vLLM refuses
(`current platform cpu does not support ray.`, vllm/v1/executor/ray_utils.py). So the Ray cluster is
real (ray 2.60 in `.venv-ray`, over .venv-vllm's packages: `make setup-ray`), the gate that counts its
joined nodes is real, the server's argv is parsed by real vLLM (the stand-in `vllm` is a script whose
shebang is the engine's Python, so the argv check runs vLLM's own parser on it), and what serves the
endpoint once the gate opens is the sim, standing in for `vllm serve`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import psutil
import pytest

from orchestra_ops.config.parallel import RaySettings, ray_ports
from orchestra_ops.core.procs import listeners
from tests.helpers import REPO
from tests.integration.cluster_fixtures import ClusterHarness, alive, cluster_fixture, harness
from tests.ports import free_port_block
from tests.raystandin import RAY_VENV, standin

cluster = cluster_fixture(slurm=False, sshd=True)
__all__ = ["cluster", "harness"]

# sshd (not vllm): it starts no vLLM server (the stand-in serves) and uses the dev cluster's sshd, so it runs in
# the dev cluster's xdist group (tests/xdist_groups.py), never beside another cluster
pytestmark = [
    pytest.mark.sshd,
    pytest.mark.timeout(900),  # a hang guard: two Ray nodes and a vLLM import on a loaded 2-core box
    pytest.mark.skipif(not os.access(RAY_VENV / "bin" / "ray", os.X_OK),
                       reason="needs .venv-ray (make setup-ray: ray beside the CPU build of vLLM)"),
]


def test_ray_head_and_worker_on_two_loopback_hosts_serve_pp2_and_down_frees_everything(
        harness: ClusterHarness) -> None:
    h = harness
    vllm = standin(h.cwd)
    ssh = h.ssh_node()["ssh"]
    ray_port = free_port_block(2 + 6 * 2 + 8 * 2)  # free on every address (127.0.0.3, 127.0.0.2)
    port = free_port_block(1)
    pair = {"hosts": ["localhost", h.cluster.ssh_address], "bind": "127.0.0.3", "gpus": 0, "cpus": 2, "ssh": ssh,
            "vllm_command": [str(vllm)]}
    model = {"model": str(REPO / ".tiny-model" / "model"), "served_model_name": "tiny", "node": "pair",
             "gpus_per_replica": 0, "pipeline_parallel": 2, "port": port,
             "ray": {"port": ray_port, "worker_ports": 8}, "max_model_len": 2048,
             "engine_args": ["--dtype", "float32", "--enforce-eager"]}
    topo = h.topology("raypair", {"pair": pair}, {"big": model}, ready_timeout_s=600)

    planned = h.ops("plan", str(topo), "--json")
    assert planned.returncode == 0, planned.stderr
    processes = {p["name"]: p for p in json.loads(planned.stdout)["processes"]}
    assert list(processes) == ["big/ray0", "big/0", "big/ray1"]
    assert [processes[n]["node"] for n in processes] == ["pair@0", "pair@0", "pair@1"]
    server = processes["big/0"]["argv"]
    assert server[server.index("--"):][1:] == [
        str(vllm), "serve", model["model"], "--host", "127.0.0.3", "--port", str(port), "--served-model-name",
        "tiny", "--max-model-len", "2048", "--pipeline-parallel-size", "2", "--dtype", "float32",
        "--enforce-eager", "--distributed-executor-backend", "ray"]

    up = h.ops("up", str(topo), timeout=800)
    assert up.returncode == 0, up.stderr + up.stdout
    state = h.state("raypair")
    by_name = {p["name"]: p for p in state["processes"]}
    assert {n: (p["role"], p["node"], p["backend"]) for n, p in by_name.items()} == {
        "big/ray0": ("ray-head", "pair@0", "local"), "big/0": ("server", "pair@0", "local"),
        "big/ray1": ("ray-worker", "pair@1", "ssh")}
    assert {p["domain"] for p in by_name.values()} == {"big"}
    assert h.endpoints("raypair") == {"tiny": [{"ip_addr": "127.0.0.3", "port": port}]}
    log = Path(by_name["big/0"]["log"]).read_text()
    assert "ops-ray-gate: 2 of 2 Ray nodes joined" in log  # counted by Ray itself before the server started
    assert log.index("ops-ray-gate: 2 of 2") < log.index("vllm stand-in: serve")

    settings = RaySettings(port=ray_port, worker_ports=8)
    ray_ports_all = ray_ports(settings, 0, 2).all() + ray_ports(settings, 1, 2).all()
    head = psutil.Process(by_name["big/ray0"]["pid"])
    worker = psutil.Process(by_name["big/ray1"]["pid"])
    ray_procs = [head, *head.children(recursive=True), worker, *worker.children(recursive=True)]
    names = {proc.name() for proc in ray_procs}
    assert {"gcs_server", "raylet"} <= names, names
    held = listeners([port, *ray_ports_all])
    assert port in held and ray_port in held  # the server and the GCS

    health = h.ops("health", "--json")
    assert health.returncode == 0, health.stderr
    report = {p["name"]: p for p in json.loads(health.stdout)["processes"]}
    assert {n: (p["state"], p["role"], p["stages"]) for n, p in report.items()} == {
        "big/ray0": ("READY", "ray-head", [0]), "big/0": ("READY", "server", [0, 1]),
        "big/ray1": ("READY", "ray-worker", [1])}

    down = h.ops("down", "raypair", timeout=300)
    assert down.returncode == 0, down.stderr + down.stdout
    assert alive(ray_procs) == []  # every Ray process it started, by pid (no `ray stop`)
    assert listeners([port, *ray_ports_all]) == {}
