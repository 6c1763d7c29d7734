"""Nothing undeclared is ever called: environment variables cannot route a request anywhere."""

from __future__ import annotations

import socket
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from orchestra_ops.fleet.state import FleetState, write_state
from tests.helpers import free_port, run_ops
from tests.integration.eval_fixtures import dataset, model_config, results
from tests.simserver import SimServer


class Listener:
    """A TCP listener that counts every connection made to it (the "external API")."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", free_port()))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    item = Listener()
    yield item
    item.close()


def _hostile_env(port: int) -> dict[str, str]:
    url = f"http://127.0.0.1:{port}"
    return {"OPENAI_API_KEY": "sk-should-never-be-used", "OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_BASE": url,
            "HTTP_PROXY": url, "HTTPS_PROXY": url, "ALL_PROXY": url, "http_proxy": url, "https_proxy": url}


def test_no_external_call_without_a_declared_provider(tmp_path: Path, listener: Listener,
                                                      sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("m", args=["--latency-ms", "5"])
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    data = dataset(tmp_path / "d.jsonl", range(10))
    env = _hostile_env(listener.port)
    proc = run_ops(["eval", "chat", "--no-analyze", "--dataset", str(data), "--model-config", str(config), "--run-dir",
                    str(tmp_path / "run")], env=env)
    assert proc.returncode == 0, proc.stderr
    assert all(r["status"] == "ok" for r in results(tmp_path / "run"))
    undeclared = run_ops(["eval", "chat", "--no-analyze", "--model", "gpt-4o", "--dataset", str(data), "--model-config",
                          str(config), "--run-dir", str(tmp_path / "run2")], env=env)
    assert undeclared.returncode == 2
    assert "'gpt-4o' is neither a role nor a declared model or provider" in undeclared.stderr
    bench = run_ops(["bench", "gpt-4o", "--model-config", str(config), "--requests", "5"], env=env)
    assert bench.returncode == 2
    assert listener.connections == 0
    assert "sk-should-never-be-used" not in (tmp_path / "run" / "eval.log").read_text()


TOPOLOGY = """\
name: evaltopo
backend: local
nodes:
  cpu: {host: localhost, gpus: 0}
models:
  answer:
    model: sim/answer
    engine: sim
    node: cpu
    gpus_per_replica: 0
    port: PORT
    request_defaults: {max_tokens: 8}
providers:
  judge: {kind: openai, model: gpt-x, base_url: "http://127.0.0.1:LISTENER/v1", api_key_env: EVALTOPO_KEY}
roles:
  responder: answer
  judge: judge
"""


def test_a_topology_routes_roles_and_names_a_missing_key(tmp_path: Path, listener: Listener,
                                                         sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("sim/answer", args=["--latency-ms", "5"])
    topo = tmp_path / "topo.yaml"
    topo.write_text(textwrap.dedent(TOPOLOGY).replace("LISTENER", str(listener.port))
                    .replace("PORT", str(sim.port)))
    ops_home = tmp_path / "ops"
    (ops_home / "evaltopo").mkdir(parents=True)
    model_config(ops_home / "evaltopo" / "model_config.json", {"sim/answer": [sim]})
    write_state(FleetState(name="evaltopo", topology_file=str(topo), backend="local", status="up",
                           started_at=time.time(), cwd=str(tmp_path)), ops_home / "evaltopo" / "state.json")
    data = dataset(tmp_path / "d.jsonl", range(5))
    env = {"OPS_HOME": str(ops_home), "EVALTOPO_KEY": ""}
    proc = run_ops(["eval", "chat", "--no-analyze",
                    "--model", "responder", "--topology", "evaltopo", "--dataset", str(data),
                    "--run-dir", str(tmp_path / "run"), "-v"], env=env)
    assert proc.returncode == 0, proc.stderr
    assert "models called: answer as responder [1 replica]" in proc.stdout
    assert f"responder -> answer (sim/answer) [model] -> 127.0.0.1:{sim.port} *" in proc.stdout  # -v: the routing
    assert f"judge     -> judge (gpt-x) [provider] -> http://127.0.0.1:{listener.port}/v1" in proc.stdout
    assert all(r["status"] == "ok" for r in results(tmp_path / "run"))
    judged = run_ops(["eval", "chat", "--no-analyze",
                      "--model", "judge", "--topology", str(topo), "--dataset", str(data),
                      "--run-dir", str(tmp_path / "run-judge")], env=env)
    assert judged.returncode == 2
    assert "provider 'judge' reads its key from $EVALTOPO_KEY, which is not set" in judged.stderr
    assert listener.connections == 0
