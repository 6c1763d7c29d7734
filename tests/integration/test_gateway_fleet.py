"""The topology's `gateway:` as a user meets it: `ops plan`, `ops up` (started once the fleet serves),
`ops health`/`ops status --json` (its URL), the endpoints file (no key of its own), `ops down`; and the
topology errors that keep it from exposing keys or landing on another machine."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
import yaml

from orchestra_ops.core.procs import listeners
from tests.helpers import free_port, run_ops
from tests.integration.test_fleet import Harness


@pytest.fixture(params=["local", "tmux"])
def harness(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Harness]:
    h = Harness(tmp_path, request.param)
    try:
        yield h
    finally:
        h.cleanup()


def with_gateway(path: Path, **gateway: object) -> int:
    body = yaml.safe_load(path.read_text())
    port = free_port()
    body["gateway"] = {"port": port, **gateway}
    body["roles"] = {"solver": "answer"}
    path.write_text(yaml.safe_dump(body))
    return port


def test_up_starts_the_gateway_after_the_fleet_and_down_stops_it(harness: Harness) -> None:
    topology = harness.topology("gwfleet", {"answer": {"replicas": 2}})
    port = with_gateway(topology)
    planned = harness.ops("plan", str(topology), "--json")
    assert planned.returncode == 0, planned.stderr
    [spec] = [p for p in json.loads(planned.stdout)["processes"] if p["kind"] == "gateway"]
    assert spec["argv"][-8:] == ["serve", "gateway", "--topology", "gwfleet", "--host", "127.0.0.1", "--port",
                                 str(port)]
    up = harness.up(topology)
    assert up.returncode == 0, up.stderr + up.stdout
    endpoints = json.loads((harness.home / "gwfleet" / "model_config.json").read_text())
    assert sorted(endpoints) == ["sim/answer"]  # the gateway is no key: ToolOrchestra reads keys as models
    health = harness.ops("health", "--json")
    assert health.returncode == 0, health.stdout + health.stderr
    report = json.loads(health.stdout)
    assert report["gateway"] == {"url": f"http://127.0.0.1:{port}"}
    assert {p["name"]: p["state"] for p in report["processes"]}["gateway"] == "READY"
    status = json.loads(harness.ops("status", "--json").stdout)
    assert status["gateway"] == {"url": f"http://127.0.0.1:{port}"}
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
    answer = client.chat.completions.create(model="solver", messages=[{"role": "user", "content": "hi"}], max_tokens=3)
    assert answer.model == "sim/answer" and answer.usage is not None and answer.usage.completion_tokens == 3
    assert sorted(m.id for m in client.models.list()) == ["answer", "sim/answer", "solver"]
    down = harness.ops("down")
    assert down.returncode == 0, down.stderr
    assert listeners([port]) == {}
    assert (harness.cwd / "runs" / "gateway-gwfleet" / "profile.jsonl").is_file()


@pytest.mark.parametrize(("gateway", "extra", "message"), [
    ({"node": "far"}, {"nodes": {"far": {"host": "10.9.9.9", "gpus": 0}}},
     "gateway.node: 'far' is not on this machine (host 10.9.9.9)"),
    ({"bind": "0.0.0.0"}, {"providers": {"judge": {"model": "gpt-x", "base_url": "https://api.example.invalid/v1",
                                                     "api_key_env": "JUDGE_KEY"}}},
     "gateway.bind: '0.0.0.0' is not loopback and the gateway injects the keys of judge"),
    ({"api_key_env": "sk-123"}, {}, "gateway.api_key_env: 'sk-123' is not an environment variable name"),
])
def test_topology_errors_name_the_gateway_line(tmp_path: Path, gateway: dict, extra: dict, message: str) -> None:
    body = {"name": "gwbad", "nodes": {"cpu": {"host": "localhost", "gpus": 0}, **extra.get("nodes", {})},
            "models": {"answer": {"model": "sim/a", "engine": "sim", "node": "cpu", "gpus_per_replica": 0,
                                  "port": 18500}},
            "providers": extra.get("providers", {}), "gateway": {"port": 18600, **gateway}}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    done = run_ops(["plan", str(path)], cwd=tmp_path)
    assert done.returncode == 2
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.startswith("gateway:"))
    assert any(text.startswith(f"{path}:") and message in text for text in done.stderr.splitlines()), done.stderr
    assert f"{path}:{line}" in done.stderr or f"{path}:{line + 1}" in done.stderr or f"{path}:{line + 2}" in \
        done.stderr
    assert "Traceback" not in done.stderr


def test_gateway_port_clash_with_a_replica(tmp_path: Path) -> None:
    body = {"name": "gwclash", "nodes": {"cpu": {"host": "localhost", "gpus": 0}},
            "models": {"answer": {"model": "sim/a", "engine": "sim", "node": "cpu", "gpus_per_replica": 0,
                                  "replicas": 2, "port": 18500}},
            "gateway": {"port": 18501}}
    path = tmp_path / "clash.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    done = run_ops(["plan", str(path)], cwd=tmp_path)
    assert done.returncode == 2
    assert "gateway.port: port 18501 on host localhost is also used by models.answer" in done.stderr
