"""vLLM's external data parallelism (one server per rank) as one failure domain, `ops up` to `ops down`.

vLLM refuses external DP for a dense model ("Non-MoE models do not support external data parallel mode",
vllm/engine/arg_utils.py), and the only model here is the dense tiny one, so the servers are the stand-in
(tests/raystandin.py, Python of .venv-vllm: real vLLM parses each rank's argv before launch; the sim serves).
What is real: the plan (one process per rank, its own port and cores, `--data-parallel-rank i`), the launch,
readiness of every rank, the endpoints file (one entry per rank), the group as one failure domain (a rank
killed: `ops health` takes the other out, `ops up` restarts both), and `ops down`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
import yaml

from orchestra_ops.core.procs import listeners
from tests.helpers import REPO, free_port_block, run_ops
from tests.raystandin import VLLM_VENV, standin

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.timeout(900),
    pytest.mark.skipif(not os.access(VLLM_VENV / "bin" / "python", os.X_OK), reason="needs .venv-vllm (make setup)"),
]


def test_external_dp_ranks_serve_fail_and_restart_as_one_group(tmp_path: Path) -> None:
    vllm = standin(tmp_path, ray=False)
    port = free_port_block(2)
    doc = {"name": "extdp", "defaults": {"ready_timeout_s": 600},
           "nodes": {"cpu": {"host": "localhost", "gpus": 0, "cpus": 2, "vllm_command": [str(vllm)]}},
           "models": {"moe": {"model": str(REPO / ".tiny-model" / "model"), "served_model_name": "tiny",
                              "node": "cpu", "gpus_per_replica": 0, "replicas": 2, "port": port,
                              "data_parallel": {"mode": "vllm-external", "expert_parallel": True},
                              "engine_args": ["--dtype", "float32", "--enforce-eager"]}}}
    topo = tmp_path / "extdp.yaml"
    topo.write_text(yaml.safe_dump(doc, sort_keys=False))
    env = {"OPS_HOME": str(tmp_path / "ops-home")}

    def ops(*args: str) -> subprocess.CompletedProcess[str]:
        return run_ops(list(args), env=env, cwd=tmp_path, timeout=700)

    up = ops("up", str(topo))
    assert up.returncode == 0, up.stderr + up.stdout
    state = json.loads((tmp_path / "ops-home" / "extdp" / "state.json").read_text())
    ranks = {p["name"]: p for p in state["processes"]}
    assert {n: (p["port"], p["ranks"], p["domain"], p["env"]["VLLM_CPU_OMP_THREADS_BIND"]) for n, p in ranks.items()} \
        == {"moe/0": (port, [0], "moe", "0"), "moe/1": (port + 1, [1], "moe", "1")}
    argv = ranks["moe/1"]["argv"]
    assert argv[argv.index("--data-parallel-size"):argv.index("--data-parallel-size") + 8] == [
        "--data-parallel-size", "2", "--data-parallel-rank", "1", "--data-parallel-address", "127.0.0.1",
        "--data-parallel-rpc-port", "29550"]
    endpoints = json.loads((tmp_path / "ops-home" / "extdp" / "model_config.json").read_text())
    assert endpoints == {"tiny": [{"ip_addr": "127.0.0.1", "port": port}, {"ip_addr": "127.0.0.1", "port": port + 1}]}

    os.kill(ranks["moe/0"]["pid"], signal.SIGKILL)  # one rank dies
    deadline = time.monotonic() + 30
    while psutil.pid_exists(ranks["moe/0"]["pid"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    health = ops("health", "--json")
    report = {p["name"]: p for p in json.loads(health.stdout)["processes"]}
    assert health.returncode != 0
    assert (report["moe/0"]["state"], report["moe/1"]["state"]) == ("DEAD", "UNHEALTHY")
    assert report["moe/1"]["detail"] == "moe/0 of its group is DEAD: the group serves only whole"

    repaired = ops("up", str(topo))  # the whole group restarts, the live rank too
    assert repaired.returncode == 0, repaired.stderr + repaired.stdout
    state_file = tmp_path / "ops-home" / "extdp" / "state.json"
    after = {p["name"]: p for p in json.loads(state_file.read_text())["processes"]}
    assert after["moe/0"]["pid"] != ranks["moe/0"]["pid"] and after["moe/1"]["pid"] != ranks["moe/1"]["pid"]
    assert not psutil.pid_exists(ranks["moe/1"]["pid"])

    down = ops("down", "extdp")
    assert down.returncode == 0, down.stderr + down.stdout
    assert [pid for pid in (after["moe/0"]["pid"], after["moe/1"]["pid"]) if psutil.pid_exists(pid)] == []
    assert listeners([port, port + 1]) == {}
