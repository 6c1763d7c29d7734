"""A small fleet of simulated engines brought up with the real `ops up`, for the tests of what a newcomer sees
(tests/integration/test_first_hour*.py): an orchestrator, an answer model that takes adapters at run time and a
judge, on free ports, in an OPS_HOME of its own. Stopped with `ops down`, then by pid whatever is left."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import free_port_block, kill_tree, run_ops, still_ours
from tests.simserver import parse_metrics


class Lab:
    """One OPS_HOME and working dir; `ops(...)` runs the real CLI there."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.home = cwd / "ops-home"
        self.env = {"OPS_HOME": str(self.home)}
        self.ports: dict[str, int] = {}
        self.topology = cwd / "lab.yaml"

    def ops(self, *args: str, timeout: float = 240, env: dict[str, str] | None = None) -> Any:
        return run_ops(list(args), env={**self.env, **(env or {})}, cwd=self.cwd, timeout=timeout)

    def write_topology(self) -> Path:
        models: dict[str, Any] = {}
        for key, replicas, extra in (("orchestrator", 1, {}), ("answer", 2, {"runtime_lora": True}),
                                     ("judge", 1, {})):
            self.ports[key] = free_port_block(replicas)
            models[key] = {"model": f"sim/{key}", "engine": "sim", "node": "cpu", "replicas": replicas,
                           "gpus_per_replica": 0, "port": self.ports[key], "sim": {"latency_ms": 1, "seed": 1},
                           **extra}
        body = {"name": "lab", "backend": "local", "defaults": {"ulimit_nofile": 4096, "ready_timeout_s": 120},
                "nodes": {"cpu": {"host": "localhost", "gpus": 0}}, "models": models,
                "roles": {"orchestrator": "orchestrator", "answer": "answer", "candidate": "answer",
                          "judge": "judge"}}
        self.topology.write_text(yaml.safe_dump(body, sort_keys=False))
        return self.topology

    def requests_served(self) -> float:
        """Chat requests every replica of the fleet has answered so far (the sims' own counter)."""
        total = 0.0
        for key, replicas in (("orchestrator", 1), ("answer", 2), ("judge", 1)):
            for offset in range(replicas):
                url = f"http://127.0.0.1:{self.ports[key] + offset}/metrics"
                with urllib.request.urlopen(url, timeout=10) as resp:
                    total += parse_metrics(resp.read().decode()).get("sim_requests_total", 0.0)
        return total

    def cleanup(self) -> None:
        for state_file in self.home.glob("*/state.json") if self.home.is_dir() else []:
            self.ops("down", state_file.parent.name, "--timeout", "5")
            for record in json.loads(state_file.read_text()).get("processes", []):
                if still_ours(record):
                    kill_tree(record["pid"])


def lab_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """The lab fleet, up until the generator is closed: a test module's fixture yields from it
    (`yield from lab_fleet(tmp_path_factory)`)."""
    harness = Lab(tmp_path_factory.mktemp("lab"))
    harness.write_topology()
    try:
        first = harness.ops("up", str(harness.topology))
        assert first.returncode == 0, first.stderr
        yield harness
    finally:
        harness.cleanup()
