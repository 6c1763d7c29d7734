"""Real vLLM (the CPU build) serving the tiny model bigger than one process: `ops up` to `ops down`.

    tensor parallel 2      one `vllm serve --tensor-parallel-size 2`, one core per rank (VLLM_CPU_OMP_THREADS_BIND 0|1)
    internal DP 2          one `vllm serve --data-parallel-size 2`, one endpoint; the client pins each task to a
                           rank with X-data-parallel-rank, and each rank's own counters
                           (vllm:request_success_total{engine="R"}) show exactly the calls pinned to it

Each starts a real vLLM of several processes on a loaded 2-core box (minutes); the module's timeout is a
hang guard, not a timing claim. External DP and Ray are not here: vLLM refuses external DP for a dense model
("Non-MoE models do not support external data parallel mode") and its CPU build cannot run the Ray executor.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import urllib.request
from collections import Counter
from pathlib import Path

import psutil
import pytest
import yaml

from orchestra_ops.client.callctx import session_scope
from orchestra_ops.client.dp_ranks import rank_for
from orchestra_ops.client.fleet_client import FleetClient
from orchestra_ops.client.sources import load_routing
from orchestra_ops.core.procs import listeners
from tests.helpers import REPO, free_port, run_ops

VLLM = REPO / ".venv-vllm" / "bin" / "vllm"
MODEL = REPO / ".tiny-model" / "model"

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.timeout(1500),
    pytest.mark.skipif(not (os.access(VLLM, os.X_OK) and (MODEL / "config.json").is_file()),
                       reason="needs .venv-vllm/bin/vllm and .tiny-model/model (make setup tiny-model)"),
]


def _topology(path: Path, name: str, port: int, **shape: object) -> Path:
    doc = yaml.safe_load((REPO / "topologies" / "vllm_cpu.yaml").read_text())
    doc["name"] = name
    doc["nodes"]["cpu"]["vllm_command"] = [str(VLLM)]
    doc["defaults"]["ready_timeout_s"] = 1200
    model = doc["models"]["tiny"]
    for key in ("runtime_lora", "max_lora_rank", "replicas", "cpus_per_replica"):
        model.pop(key, None)
    model.update(model=str(MODEL), tokenizer=str(MODEL), port=port, **shape)
    doc.pop("services", None)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
        return resp.read().decode()


def _successes_by_engine(text: str) -> Counter[str]:
    """vllm:request_success_total summed over finished reasons, per engine (DP rank)."""
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        if line.startswith("vllm:request_success_total{"):
            engine = re.search(r'engine="(\d+)"', line)
            if engine:
                counts[engine.group(1)] += int(float(line.rsplit(" ", 1)[1]))
    return counts


def _tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def _gone(procs: list[psutil.Process]) -> list[int]:
    return [p.pid for p in procs if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def _up(tmp_path: Path, name: str, **shape: object) -> tuple[dict[str, str], dict[str, object], int]:
    env = {"OPS_HOME": str(tmp_path / "ops-home")}
    port = free_port()
    topo = _topology(tmp_path / f"{name}.yaml", name, port, **shape)
    up = run_ops(["up", str(topo)], env=env, cwd=tmp_path, timeout=1300)
    assert up.returncode == 0, up.stderr + up.stdout
    state = json.loads((tmp_path / "ops-home" / name / "state.json").read_text())
    return env, state, port


def _down(tmp_path: Path, env: dict[str, str], name: str, procs: list[psutil.Process], port: int) -> None:
    down = run_ops(["down", name], env=env, cwd=tmp_path, timeout=300)
    assert down.returncode == 0, down.stderr + down.stdout
    assert _gone(procs) == []  # API server, engine core(s), workers: every process of the group
    assert listeners([port]) == {}


def test_tensor_parallel_2_one_core_per_rank(tmp_path: Path) -> None:
    env, state, port = _up(tmp_path, "bm-tp2", tensor_parallel=2)
    (record,) = state["processes"]
    assert record["env"]["VLLM_CPU_OMP_THREADS_BIND"] == "0|1"
    argv = record["argv"]
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
    procs = _tree(record["pid"])
    try:
        log = Path(record["log"]).read_text()
        assert "local_rank=0, core ids=[0]" in log and "local_rank=1, core ids=[1]" in log  # vLLM's own binding
        endpoints = json.loads((tmp_path / "ops-home" / "bm-tp2" / "model_config.json").read_text())
        assert endpoints == {"tiny": [{"ip_addr": "127.0.0.1", "port": port}]}
    finally:
        _down(tmp_path, env, "bm-tp2", procs, port)


def test_internal_dp_2_pins_each_task_to_one_rank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env, state, port = _up(tmp_path, "bm-dp2", replicas=2, data_parallel={"mode": "vllm-internal"})
    (record,) = state["processes"]
    assert (record["ranks"], record["env"]["VLLM_CPU_OMP_THREADS_BIND"]) == ([0, 1], "0|1")
    procs = _tree(record["pid"])
    try:
        endpoints_file = tmp_path / "ops-home" / "bm-dp2" / "model_config.json"
        assert json.loads(endpoints_file.read_text()) == {"tiny": [{"ip_addr": "127.0.0.1", "port": port}]}
        tasks = [f"task-{i}" for i in range(6)]
        expected = Counter(str(rank_for(task, 2)) for task in tasks for _ in range(3))
        assert set(expected) == {"0", "1"}  # both ranks get tasks (a fixed hash: this never flakes)
        before = _successes_by_engine(_metrics(port))
        monkeypatch.setenv("OPS_HOME", env["OPS_HOME"])  # the routing reads the fleet `ops up` recorded
        routing = load_routing("bm-dp2")
        assert routing.targets["tiny"].dp_ranks == 2

        async def run() -> None:
            fleet = FleetClient(routing)
            client = fleet.client("tiny")

            async def task(task_id: str) -> None:
                with session_scope(task_id):  # a task's session key, as a suite sets it (callctx)
                    for _ in range(3):
                        await client.chat([{"role": "user", "content": f"{task_id} hello"}], max_tokens=2)

            try:
                await asyncio.gather(*(task(t) for t in tasks))
            finally:
                await fleet.close()

        asyncio.run(run())
        after = _successes_by_engine(_metrics(port))
        assert after - before == expected  # every call on its task's rank, per vLLM's own per-rank counters
    finally:
        _down(tmp_path, env, "bm-dp2", procs, port)
