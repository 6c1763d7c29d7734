"""One topology over three backends: a local node, an ssh node (sshd on 127.0.0.2) and a slurm node.

One `ops up` starts all of them in parallel and one `ops down` stops all; a failure on one node
stops what the same `ops up` started on the others.
"""

from __future__ import annotations

import json

import psutil
import pytest

from orchestra_ops.core.procs import listeners
from tests.helpers import REPO, free_port_block
from tests.integration.cluster_fixtures import ClusterHarness, cluster_fixture, harness

cluster = cluster_fixture(slurm=True, sshd=True)
__all__ = ["cluster", "harness"]


def _gone(records: list[dict]) -> list[str]:
    """Recorded processes (local and ssh: both on this machine) that still run."""
    left = []
    for record in records:
        if record.get("pid") and psutil.pid_exists(record["pid"]):
            try:
                if psutil.Process(record["pid"]).status() != psutil.STATUS_ZOMBIE:
                    left.append(f"{record['name']} pid {record['pid']}")
            except psutil.NoSuchProcess:
                continue
    return left


def _nodes(h: ClusterHarness) -> dict:
    return {"cpu": h.local_node(), "far": h.ssh_node(), "gpu": h.slurm_node(gpus=2)}


def test_one_up_and_one_down_over_local_ssh_and_slurm(harness: ClusterHarness) -> None:
    h = harness
    topo = h.topology("mixed", _nodes(h), {"a": h.sim("cpu"), "b": h.sim("far"),
                                           "c": h.sim("gpu", replicas=2, gpus_per_replica=1)})
    result = h.ops("up", str(topo))
    assert result.returncode == 0, result.stderr
    assert "mixed: 6 processes ready in" in result.stderr
    assert "on cpu (local), far (ssh), gpu (slurm)" in result.stderr
    state = h.state("mixed")
    assert [(n["name"], n["backend"]) for n in state["nodes"]] == [("cpu", "local"), ("far", "ssh"),
                                                                   ("gpu", "slurm")]
    hosts = {"cpu": "127.0.0.1", "far": h.cluster.ssh_address, "gpu": h.cluster.node}
    endpoints = h.endpoints("mixed")
    for record in state["processes"]:
        assert {"ip_addr": hosts[record["node"]], "port": record["port"]} in endpoints[record["endpoint_key"]]
    assert sum(len(entries) for entries in endpoints.values()) == 6

    health = h.ops("health", "--json")
    assert health.returncode == 0, health.stderr
    report = json.loads(health.stdout)
    assert [(p["node"], p["backend"], p["state"]) for p in report["processes"]] == [
        ("cpu", "local", "READY")] * 2 + [("far", "ssh", "READY")] * 2 + [("gpu", "slurm", "READY")] * 2
    ports = [record["port"] for record in state["processes"]]
    servers = h.servers(ports)
    assert len(servers) == 6

    down = h.ops("down")
    assert down.returncode == 0, down.stderr
    assert "mixed: 6 stopped; verified: no process, port, tmux session or slurm job left" in down.stderr
    assert [p.pid for p in servers.values() if p.is_running() and p.status() != psutil.STATUS_ZOMBIE] == []
    assert listeners(ports) == {}
    assert h.cluster.jobs() == []
    assert not h.has_session("ops-mixed-far")


def test_a_crash_on_the_slurm_node_stops_the_local_and_ssh_nodes_too(harness: ClusterHarness) -> None:
    h = harness
    topo = h.topology("half", _nodes(h), {
        "a": h.sim("cpu", sim={"startup_delay_s": 600}), "b": h.sim("far", sim={"startup_delay_s": 600}),
        "c": h.sim("gpu", replicas=1, gpus_per_replica=1, engine_args=["--no-such-flag"])})
    result = h.ops("up", str(topo), "--timeout", "600")
    assert result.returncode == 3
    assert "error: c/0 exited with status 2 before it was serving (node gpu" in result.stderr
    assert "No such option '--no-such-flag'" in result.stderr
    assert "\n  fleet stopped (--keep-on-failure leaves it running)" in result.stderr
    state = h.state("half")
    assert state["status"] == "down"
    assert [n["name"] for n in state["nodes"]] == ["cpu", "far", "gpu"]  # all three had started
    assert _gone(state["processes"]) == []
    assert listeners([record["port"] for record in state["processes"]]) == {}
    assert h.cluster.jobs() == []
    assert not h.has_session("ops-half-far")


VLLM = REPO / ".venv-vllm" / "bin" / "vllm"
TINY = REPO / ".tiny-model" / "model"
needs_vllm = pytest.mark.skipif(not (VLLM.exists() and TINY.exists()),
                                reason="the engine venv and tiny model (make setup tiny-model) are not built")


def _bad_vllm(node: str, port: int) -> dict:
    """A real vLLM model whose engine_args that vLLM itself refuses (`--dtype float13`)."""
    return {"model": str(TINY), "node": node, "gpus_per_replica": 0, "port": port, "vllm_command": [str(VLLM)],
            "engine_args": ["--enforce-eager", "--dtype", "float13"]}


@needs_vllm
def test_vllm_on_an_ssh_node_refuses_a_bad_flag_before_anything_starts(harness: ClusterHarness) -> None:
    h = harness
    nodes = {"far": {**h.ssh_node(), "gpus": 0}, "cpu": h.local_node()}
    topo = h.topology("badflag", nodes, {"v": _bad_vllm("far", free_port_block(1)), "c": h.sim("cpu")})
    result = h.ops("up", str(topo))
    assert result.returncode == 2, result.stderr
    line = topo.read_text().splitlines().index("    - --dtype") + 1  # the engine_args entry vLLM names
    assert (f"{topo}:{line}: models.v.engine_args.1: vLLM 0.32.0+cpu on node far refuses the command of v/0: "
            "vllm serve: error: argument --dtype: invalid choice: 'float13'") in result.stderr
    assert "Traceback" not in result.stderr
    assert not (h.home / "badflag" / "state.json").exists()  # nothing was started anywhere


@needs_vllm
def test_vllm_on_a_slurm_node_checks_inside_the_job_before_any_replica_starts(harness: ClusterHarness) -> None:
    h = harness
    topo = h.topology("badjob", {"gpu": h.slurm_node(gpus=0)}, {"v": _bad_vllm("gpu", free_port_block(2))})
    result = h.ops("up", str(topo))
    assert result.returncode == 3, result.stderr
    assert ("ops-job: v/0: vLLM on " in result.stderr and "refuses its command: " in result.stderr
            and "argument --dtype: invalid choice: 'float13'" in result.stderr), result.stderr
    job_log = (h.home / "badjob" / "logs" / "gpu.slurm.log").read_text()
    assert "ops-job: started" not in job_log  # the replica never started
    assert not (h.home / "badjob" / "logs" / "v-0.log").read_text().count("\n") > 1  # only ops' header line
    assert h.cluster.jobs() == []
