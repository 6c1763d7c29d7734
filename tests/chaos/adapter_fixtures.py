"""A simulated fleet whose base model takes runtime LoRA adapters, driven through the real `ops` CLI
(OPS_HOME and the run dirs in the test's tmp dir), for the adapter, posttrain and cache tests."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.helpers import free_port_block, kill_tree, run_ops, still_ours

BASE = "sim/base"


class SimFleet:
    def __init__(self, tmp_path: Path, name: str = "ad") -> None:
        self.cwd = tmp_path
        self.name = name
        self.home = tmp_path / "home"
        self.env = {"OPS_HOME": str(self.home)}
        self.ports: list[int] = []

    def ops(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return run_ops(list(args), env=self.env, cwd=self.cwd, timeout=timeout)

    def topology(self, *, replicas: int = 2, latency_ms: int = 1, model: str = BASE, **spec: Any) -> Path:
        if not self.ports:
            port = free_port_block(replicas)
            self.ports = [port + i for i in range(replicas)]
        path = self.cwd / f"{self.name}.yaml"
        path.write_text(yaml.safe_dump({
            "name": self.name, "backend": "local", "defaults": {"ulimit_nofile": 4096, "ready_timeout_s": 120},
            "nodes": {"cpu": {"host": "localhost", "gpus": 0}},
            "models": {"answer": {"model": model, "engine": "sim", "node": "cpu", "replicas": replicas,
                                  "gpus_per_replica": 0, "port": self.ports[0], "runtime_lora": True,
                                  "sim": {"latency_ms": latency_ms}, **spec}}}))
        return path

    def up(self, *args: str) -> None:
        proc = self.ops("up", str(self.cwd / f"{self.name}.yaml"), *args)
        assert proc.returncode == 0, proc.stderr

    def state(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.home / self.name / "state.json").read_text())
        return data

    def pid(self, process: str) -> int:
        return int(next(r["pid"] for r in self.state()["processes"] if r["name"] == process))

    def records(self) -> dict[str, Any]:
        path = self.home / self.name / "lora.json"
        return json.loads(path.read_text())["adapters"] if path.exists() else {}

    def endpoints(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.home / self.name / "model_config.json").read_text())
        return data

    def cards(self, port: int) -> dict[str, dict[str, Any]]:
        data = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()["data"]
        return {c["id"]: c for c in data}

    def served(self) -> list[dict[str, str]]:
        """Each replica's adapters: name -> root."""
        return [{n: c["root"] for n, c in self.cards(p).items() if c.get("parent")} for p in self.ports]

    def requests(self) -> list[float]:
        """sim_requests_total of each replica: chat requests that reached the engine."""
        out = []
        for port in self.ports:
            text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
            line = next(x for x in text.splitlines() if x.startswith("sim_requests_total"))
            out.append(float(line.split()[-1]))
        return out

    def stop(self) -> None:
        """`ops down`, then anything of ours still alive (a record) killed by pid."""
        state_file = self.home / self.name / "state.json"
        if not state_file.exists():
            return
        self.ops("down", self.name, "--timeout", "5", timeout=120)
        for record in json.loads(state_file.read_text()).get("processes", []):
            if still_ours(record):
                kill_tree(record["pid"])


def fleet_of(tmp_path: Path) -> Iterator[SimFleet]:
    """For a module's fixture: `yield from fleet_of(tmp_path)`; whatever the test started is stopped after."""
    fleet = SimFleet(tmp_path)
    try:
        yield fleet
    finally:
        fleet.stop()
