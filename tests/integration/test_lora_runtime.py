"""`ops lora load/unload` on real simulated replicas: all or none, and the endpoints file follows."""

from __future__ import annotations

import json
import os
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import yaml
from orchestra_ops.services.simllm import replies, rules
from orchestra_ops.services.simllm.lora import adapter_reply

from orchestra_ops.fleet.state import FleetState, ProcessRecord, write_state
from tests.adapters import make_adapter
from tests.helpers import free_port_block, run_ops
from tests.simserver import SimServer

RUNTIME = {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "1"}


class Fleet:
    def __init__(self, tmp_path: Path) -> None:
        self.cwd = tmp_path
        self.env = {"OPS_HOME": str(tmp_path / "home")}

    def ops(self, *args: str) -> Any:
        return run_ops(list(args), env=self.env, cwd=self.cwd, timeout=180)

    def endpoints(self, name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.cwd / "home" / name / "model_config.json").read_text())
        return data

    def records(self, name: str) -> dict[str, Any]:
        path = self.cwd / "home" / name / "lora.json"
        return json.loads(path.read_text())["adapters"] if path.exists() else {}


def ids(port: int) -> dict[str, Any]:
    return {c["id"]: c for c in httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()["data"]}


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    harness = Fleet(tmp_path)
    yield harness
    for state in (tmp_path / "home").glob("*/state.json"):
        harness.ops("down", state.parent.name, "--timeout", "5")


def test_load_into_every_replica_then_unload_everywhere(fleet: Fleet, tmp_path: Path) -> None:
    ft = make_adapter(tmp_path / "adapters" / "ft", r=8)
    port = free_port_block(2)
    topology = tmp_path / "lt.yaml"
    topology.write_text(yaml.safe_dump({
        "name": "lt", "backend": "local", "defaults": {"ulimit_nofile": 4096, "ready_timeout_s": 120},
        "nodes": {"cpu": {"host": "localhost", "gpus": 0}},
        "models": {"base": {"model": "sim/base", "engine": "sim", "node": "cpu", "replicas": 2, "gpus_per_replica": 0,
                            "port": port, "runtime_lora": True, "sim": {"latency_ms": 1}}},
        "roles": {"candidate": "base"}}))
    up = fleet.ops("up", str(topology))
    assert up.returncode == 0, up.stderr
    ports = (port, port + 1)

    loaded = fleet.ops("lora", "load", "ft", "adapters/ft", "--json")  # relative to where ops runs
    assert loaded.returncode == 0, loaded.stderr
    report = json.loads(loaded.stdout)
    assert (report["model"], report["path"], report["rank"]) == ("base", str(ft), 8)
    assert [(r["replica"], r["ok"], r["status"]) for r in report["replicas"]] == [
        ("base/0", True, 200), ("base/1", True, 200)]
    for p in ports:
        assert (ids(p)["ft"]["root"], ids(p)["ft"]["parent"]) == (str(ft), "sim/base")
    replicas = [{"ip_addr": "127.0.0.1", "port": p} for p in ports]
    assert fleet.endpoints("lt") == {"sim/base": replicas, "ft": replicas}
    assert fleet.records("lt")["ft"]["model"] == "base"

    health = json.loads(fleet.ops("health", "--json").stdout)
    assert [(p["name"], p["adapters"]) for p in health["processes"]] == [("base/0", ["ft"]), ("base/1", ["ft"])]
    listing = json.loads(fleet.ops("lora", "list", "--json").stdout)
    assert listing["adapters"] == {"ft": {"origin": "ops lora load"}}

    # an adapter name routes to the base replicas with the adapter as the request's model
    question = "Name a prime number above 10."
    (tmp_path / "d.jsonl").write_text(json.dumps({"id": "q", "prompt": question}) + "\n")
    run = fleet.ops("eval", "chat", "--no-analyze", "--model", "ft", "--dataset", "d.jsonl", "--run-dir", "run")
    assert run.returncode == 0, run.stderr
    base_text = rules.respond({"model": "sim/base", "messages": [{"role": "user", "content": question}]}).content
    answer = json.loads((tmp_path / "run" / "results.jsonl").read_text())["answer"]
    assert answer == adapter_reply(replies.Reply(replies.EXPERT, base_text), "ft").content != base_text

    again = fleet.ops("lora", "load", "ft", str(ft), "--json")  # the same dir again: adopted where it is served
    assert again.returncode == 0, again.stderr
    assert [(r["replica"], r["ok"], r["status"], r["message"]) for r in json.loads(again.stdout)["replicas"]] == [
        ("base/0", True, None, f"already serves 'ft' from {ft}: adopted"),
        ("base/1", True, None, f"already serves 'ft' from {ft}: adopted")]
    other = make_adapter(tmp_path / "adapters" / "other", r=8)
    elsewhere = fleet.ops("lora", "load", "ft", str(other))
    assert elsewhere.returncode == 2
    assert f"error: 'ft' is already loaded into base from {ft}; `ops lora unload ft` first" in elsewhere.stderr

    unloaded = fleet.ops("lora", "unload", "ft", "--json")
    assert unloaded.returncode == 0, unloaded.stderr
    assert [(r["replica"], r["message"]) for r in json.loads(unloaded.stdout)["replicas"]] == [
        ("base/0", "removed"), ("base/1", "removed")]
    assert all("ft" not in ids(p) for p in ports)
    assert fleet.endpoints("lt") == {"sim/base": replicas}
    assert fleet.records("lt") == {}

    # a restart drops runtime adapters; what ops remembers follows
    assert fleet.ops("lora", "load", "ft", str(ft)).returncode == 0
    assert fleet.ops("up", str(topology), "--replace").returncode == 0
    assert fleet.endpoints("lt") == {"sim/base": replicas}
    gone = fleet.ops("lora", "unload", "ft")
    assert gone.returncode == 2 and "no adapter 'ft' was loaded with `ops lora load` into 'lt' (loaded: none)" \
        in gone.stderr


def _state(tmp_path: Path, sims: list[SimServer], topology: Path) -> None:
    records = []
    for index, sim in enumerate(sims):
        proc = psutil.Process(sim.pid)
        records.append(ProcessRecord(
            name=f"base/{index}", group="base", kind="sim", pid=sim.pid, pgid=os.getpgid(sim.pid), sid=None,
            create_time=proc.create_time(), host="127.0.0.1", port=sim.port, log=str(sim.log_path),
            argv=sim.argv, env={}, served_model_name="sim/base", endpoint_key="sim/base"))
    home = tmp_path / "home" / "lr"
    home.mkdir(parents=True)
    endpoints = home / "model_config.json"
    endpoints.write_text(json.dumps({"sim/base": [{"ip_addr": "127.0.0.1", "port": s.port} for s in sims]}))
    write_state(FleetState(name="lr", topology_file=str(topology), backend="local", status="up",
                           started_at=time.time(), cwd=str(tmp_path), processes=records,
                           endpoints_file=str(endpoints)), home / "state.json")


@pytest.mark.parametrize(("second", "why"), [
    (dict(args=["--enable-lora", "--max-lora-rank", "8"], env=RUNTIME),
     "answered 500: LoRA rank 16 is greater than max_lora_rank 8."),
    (dict(args=["--enable-lora"], env={"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "0"}),
     "answered 404: Not Found (the route is missing: was it started with runtime_lora: true?)"),
])
def test_a_replica_that_refuses_leaves_none_serving_it(tmp_path: Path, sim_server: Callable[..., SimServer],
                                                        second: dict[str, Any], why: str) -> None:
    ft = make_adapter(tmp_path / "ft", r=16)
    first = sim_server("sim/base", args=["--enable-lora", "--max-lora-rank", "16"], env=RUNTIME)
    other = sim_server("sim/base", **second)
    topology = tmp_path / "lr.yaml"
    topology.write_text(textwrap.dedent(f"""\
        name: lr
        nodes: {{cpu: {{host: localhost, gpus: 0}}}}
        models:
          base: {{model: sim/base, engine: sim, node: cpu, replicas: 2, gpus_per_replica: 0, port: {first.port},
                 runtime_lora: true, max_lora_rank: 16}}
        """))
    _state(tmp_path, [first, other], topology)
    env = {"OPS_HOME": str(tmp_path / "home")}
    before = (tmp_path / "home" / "lr" / "model_config.json").read_text()

    proc = run_ops(["lora", "load", "ft", str(ft), "--topology", "lr"], env=env, cwd=tmp_path)
    assert proc.returncode == 3
    assert proc.stderr == (
        "error: cannot load adapter 'ft' into base: 1 of 2 replica(s) refused or did not answer\n"
        f"  base/1 (127.0.0.1:{other.port}): {why}\n"
        "  rolled back: unloaded again from base/0\n"
        "  'ft' is served nowhere\n")
    assert "ft" not in ids(first.port) and "ft" not in ids(other.port)
    assert (tmp_path / "home" / "lr" / "model_config.json").read_text() == before
    assert not (tmp_path / "home" / "lr" / "lora.json").exists()
