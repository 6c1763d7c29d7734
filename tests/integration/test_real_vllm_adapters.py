"""Adapters against real vLLM (the CPU build in `.venv-vllm`, the tiny model and its real LoRA `.tiny-model/ft`):
the response cache keys on what `ft` stands for, and a runtime adapter survives `ops up` repairing its replica.

One fleet for the module (`ops up` of topologies/vllm_cpu.yaml cut to one vLLM replica, plus a simulated model
so that a killed vLLM replica is a repair, not a fresh start), in file order:

    two adapter dirs named ft (a copy of .tiny-model/ft with another lora_alpha): `ops posttrain --cache` on the
    first, then on the second -> the second's ft calls reach vLLM (no cache hit) and answer otherwise; the base
    model's calls replay; the first dir again replays everything
    `ops lora load ft`, kill -9 the vLLM API server, `ops up` -> the new process serves ft, from the same dir,
    and answers as the old one did

The tiny model answers garbage: assertions are on hits, calls, roots and whether answers are equal, never on
accuracy. Everything started is stopped by pid (the fixture's finalizer).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import yaml

from orchestra_ops.core import procs
from tests.helpers import free_port_block, kill_tree, run_ops, still_ours
from tests.integration.test_real_vllm import ADAPTER, MODEL, VLLM, write_topology

NAME = "realad"
SAMPLES = 4  # gsm8k samples per posttrain run: 2 * 4 calls

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.timeout(1200),  # a hang guard for one fleet start, a repair and three posttrain runs on 2 cores
    pytest.mark.skipif(not (os.access(VLLM, os.X_OK) and (MODEL / "config.json").is_file()),
                       reason="needs .venv-vllm/bin/vllm and .tiny-model/model (make setup tiny-model)"),
]


@dataclass
class Fleet:
    cwd: Path
    env: dict[str, str]
    topology: Path
    port: int  # the vLLM replica

    def ops(self, *args: str, timeout: float = 900) -> Any:
        return run_ops(list(args), env=self.env, cwd=self.cwd, timeout=timeout)

    def state(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((Path(self.env["OPS_HOME"]) / NAME / "state.json").read_text())
        return data

    def pid(self, process: str) -> int:
        return int(next(r["pid"] for r in self.state()["processes"] if r["name"] == process))

    def cards(self) -> dict[str, dict[str, Any]]:
        data = httpx.get(f"http://127.0.0.1:{self.port}/v1/models", timeout=30).json()["data"]
        return {c["id"]: c for c in data}

    def chat(self, model: str, content: str) -> str:
        body = {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": 12,
                "temperature": 0}
        answer = httpx.post(f"http://127.0.0.1:{self.port}/v1/chat/completions", json=body, timeout=120).json()
        return str(answer["choices"][0]["message"]["content"])


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    work = tmp_path_factory.mktemp("realad")
    port = free_port_block(2)
    topology = write_topology(work / f"{NAME}.yaml", NAME, port, None)
    doc = yaml.safe_load(topology.read_text())
    doc["models"]["tiny"]["replicas"] = 1
    doc["models"]["sidecar"] = {"model": "sim/side", "engine": "sim", "node": "cpu", "replicas": 1,
                                "gpus_per_replica": 0, "port": port + 1}
    topology.write_text(yaml.safe_dump(doc, sort_keys=False))
    state = Fleet(cwd=work, env={"OPS_HOME": str(work / "ops-home")}, topology=topology, port=port)
    try:
        up = state.ops("up", str(topology))
        assert up.returncode == 0, up.stdout + up.stderr
        yield state
    finally:
        _stop(state)


def _stop(fleet: Fleet) -> None:
    state_file = Path(fleet.env["OPS_HOME"]) / NAME / "state.json"
    if not state_file.exists():
        return
    fleet.ops("down", NAME, "--timeout", "15", timeout=120)
    for record in json.loads(state_file.read_text()).get("processes", []):
        if still_ours(record):
            kill_tree(record["pid"])
        if record.get("pgid") and record.get("create_time"):
            for proc in procs.group_members(record["pgid"], record.get("sid"), record["create_time"]):
                kill_tree(proc.pid)


def _second_checkpoint(work: Path) -> Path:
    """A copy of the real adapter with another lora_alpha: the same name, other outputs."""
    other = work / "ckpt-400"
    shutil.copytree(ADAPTER, other)
    config = json.loads((other / "adapter_config.json").read_text())
    config["lora_alpha"] = 4 * config["lora_alpha"]
    (other / "adapter_config.json").write_text(json.dumps(config, indent=2))
    return other


def _calls(run_dir: Path) -> dict[str, tuple[int, int]]:
    """model -> (answered from the cache, asked of vLLM)."""
    out: dict[str, list[int]] = {}
    for line in (run_dir / "profile.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("type") == "model_call":
            counts = out.setdefault(event["model"], [0, 0])
            counts[0 if event.get("cache") == "hit" else 1] += 1
    return {model: (hits, calls) for model, (hits, calls) in out.items()}


def _predictions(run_dir: Path, model: str) -> dict[str, str]:
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line.strip()]
    return {r["id"]: r["prediction"] for r in records if r["id"].endswith(f"@{model}")}


def test_two_adapter_dirs_of_one_name_never_share_cached_answers(fleet: Fleet) -> None:
    other = _second_checkpoint(fleet.cwd)
    cache = fleet.cwd / "C.sqlite"

    def posttrain(adapter: Path, run_dir: str) -> Any:
        proc = fleet.ops("posttrain", "--topology", NAME, "--model", "tiny", "--adapter", f"ft={adapter}",
                         "--datasets", "gsm8k", "--sample", str(SAMPLES), "--max-tokens", "16", "--max-drop", "101",
                         "--cache-file", str(cache), "--run-dir", run_dir, "--json")
        assert proc.returncode == 0, proc.stdout + proc.stderr  # no drop exceeds 101 points: the gate passes
        return json.loads(proc.stdout)

    first = posttrain(ADAPTER, "R1")
    assert first["cache"] == {"hits": 0, "calls": 2 * SAMPLES, "model_calls": 2 * SAMPLES}
    second = posttrain(other, "R2")
    assert second["cache"] == {"hits": SAMPLES, "calls": 2 * SAMPLES, "model_calls": SAMPLES}
    assert _calls(fleet.cwd / "R2") == {"tiny": (SAMPLES, 0), "ft": (0, SAMPLES)}  # ft's calls all reached vLLM
    a, b = _predictions(fleet.cwd / "R1", "ft"), _predictions(fleet.cwd / "R2", "ft")
    assert a.keys() == b.keys() and len(a) == SAMPLES
    assert a != b  # the second checkpoint answers otherwise: its answers are its own, not the first's
    assert _predictions(fleet.cwd / "R1", "tiny") == _predictions(fleet.cwd / "R2", "tiny")
    identities = json.loads((fleet.cwd / "R2" / "run.json").read_text())["cache"]["identities"]
    assert [r["path"] for r in identities["ft"]["roots"]] == [str(other.resolve())]  # vLLM's /v1/models root

    third = posttrain(ADAPTER, "R3")  # the first dir again, the same files: every answer replays
    assert third["cache"] == {"hits": 2 * SAMPLES, "calls": 2 * SAMPLES, "model_calls": 0}
    assert _predictions(fleet.cwd / "R3", "ft") == a
    assert set(fleet.cards()) == {"tiny"}  # each posttrain unloaded its adapter


def test_a_runtime_adapter_survives_a_repair_of_its_replica(fleet: Fleet) -> None:
    loaded = fleet.ops("lora", "load", "ft", str(ADAPTER), "--model", "tiny")
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    prompt = "tell me about the weather in paris"
    before = fleet.chat("ft", prompt)
    assert before != fleet.chat("tiny", prompt)

    old = fleet.pid("tiny/0")
    created = psutil.Process(old).create_time()
    os.kill(old, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while procs.is_alive(old, created):
        assert time.monotonic() < deadline, "the API server outlived SIGKILL by 60 s"
        time.sleep(0.1)

    up = fleet.ops("up", str(fleet.topology))
    assert up.returncode == 0, up.stdout + up.stderr
    assert f"{NAME}: restarted tiny/0" in up.stderr
    assert f"{NAME}: runtime adapter 'ft' into tiny/0 loaded again" in up.stderr
    assert fleet.pid("tiny/0") != old
    cards = fleet.cards()
    assert (cards["ft"]["root"], cards["ft"]["parent"]) == (str(ADAPTER), "tiny")
    assert fleet.chat("ft", prompt) == before  # the same adapter, the same greedy answer
    endpoints = json.loads((Path(fleet.env["OPS_HOME"]) / NAME / "model_config.json").read_text())
    assert endpoints["ft"] == endpoints["tiny"] == [{"ip_addr": "127.0.0.1", "port": fleet.port}]
    records = json.loads((Path(fleet.env["OPS_HOME"]) / NAME / "lora.json").read_text())["adapters"]
    assert [(r["name"], r["pid"]) for r in records["ft"]["replicas"]] == [("tiny/0", fleet.pid("tiny/0"))]

    unloaded = fleet.ops("lora", "unload", "ft")
    assert unloaded.returncode == 0, unloaded.stdout + unloaded.stderr
    assert set(fleet.cards()) == {"tiny"}
