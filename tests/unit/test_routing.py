"""Routing: roles resolve to declared models/providers only; keys come from the environment at call time."""

from __future__ import annotations

import asyncio
import json
import textwrap
import time
from pathlib import Path

import pytest
from aiohttp import web

from orchestra_ops.client.fleet_client import FleetClient
from orchestra_ops.client.routing import from_model_config
from orchestra_ops.client.sources import load_routing
from orchestra_ops.errors import ConfigError, StateError
from orchestra_ops.fleet.state import FleetState, write_state

TOPOLOGY = textwrap.dedent("""\
    name: rt
    backend: local
    nodes:
      cpu: {host: localhost, gpus: 0}
    models:
      answer:
        model: sim/answer
        engine: sim
        node: cpu
        gpus_per_replica: 0
        replicas: 2
        port: 18500
        max_model_len: 4096
        request_defaults: {temperature: 0}
        request_timeout_s: 45
    providers:
      judge: {kind: openai, model: gpt-x, base_url: "http://127.0.0.1:PORT/v1", api_key_env: RT_JUDGE_KEY,
              request_timeout_s: 900}
    roles:
      responder: answer
      judge: judge
    """)


def write_fleet(tmp_path: Path, port: int = 9) -> Path:
    topo = tmp_path / "rt.yaml"
    topo.write_text(TOPOLOGY.replace("PORT", str(port)))
    ops = tmp_path / "ops"
    (ops / "rt").mkdir(parents=True)
    (ops / "rt" / "model_config.json").write_text(json.dumps(
        {"sim/answer": [{"ip_addr": "127.0.0.1", "port": 18500}, {"ip_addr": "127.0.0.1", "port": 18501}]}))
    return topo


def test_roles_resolve_to_declared_targets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPS_HOME", str(tmp_path / "ops"))
    routing = load_routing(str(write_fleet(tmp_path)))
    role, target = routing.resolve("responder")
    assert role == "responder" and target.name == "answer" and target.served_name == "sim/answer"
    assert target.addresses == (("127.0.0.1", 18500), ("127.0.0.1", 18501))
    assert target.max_model_len == 4096 and dict(target.request_defaults) == {"temperature": 0}
    assert target.request_timeout_s == 45 and routing.resolve("judge")[1].request_timeout_s == 900
    assert routing.resolve("sim/answer")[1] is target  # the served name works too
    assert routing.resolve("judge")[1].kind == "provider"
    with pytest.raises(ConfigError, match="'gpt-4o' is neither a role nor a declared model"):
        routing.resolve("gpt-4o")
    assert ("responder", "answer (sim/answer)", "model", "127.0.0.1:18500, 127.0.0.1:18501") in routing.table()


def test_the_state_file_names_the_topology(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPS_HOME", str(tmp_path / "ops"))
    topo = write_fleet(tmp_path)
    write_state(FleetState(name="rt", topology_file=str(topo), backend="local", status="up",
                           started_at=time.time(), cwd=str(tmp_path)))
    assert load_routing("rt").name == "rt"
    assert load_routing().name == "rt"  # the latest topology that is up
    (tmp_path / "ops" / "rt" / "model_config.json").unlink()
    with pytest.raises(StateError, match=r"model_config.json: no endpoints file .* run `ops up"):
        load_routing("rt")
    with pytest.raises(StateError, match="'nope' is neither a topology file nor a topology that is up"):
        load_routing("nope")


def test_model_config_keys_are_the_roles(tmp_path: Path) -> None:
    routing = from_model_config({"m1": [{"ip_addr": "h", "port": 1}], "retrieval": [{"ip_addr": "h", "port": 2}]},
                                source="mc.json", name="mc")
    assert set(routing.roles) == {"m1", "retrieval"}
    assert routing.chat_target("m1").addresses == (("h", 1),)


def test_a_provider_key_is_read_at_call_time_and_never_kept(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    async def chat(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        return web.json_response({"choices": [{"message": {"role": "assistant", "content": "j"},
                                               "finish_reason": "stop"}]})

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        monkeypatch.setenv("OPS_HOME", str(tmp_path / "ops"))
        monkeypatch.delenv("RT_JUDGE_KEY", raising=False)
        routing = load_routing(str(write_fleet(tmp_path, port)))
        fleet = FleetClient(routing)
        with pytest.raises(ConfigError, match=r"reads its key from \$RT_JUDGE_KEY, which is not set"):
            fleet.check(["judge"])
        client = fleet.client("judge")
        monkeypatch.setenv("RT_JUDGE_KEY", "secret-1")
        await fleet.chat("judge", [{"role": "user", "content": "q"}])
        monkeypatch.setenv("RT_JUDGE_KEY", "secret-2")
        await fleet.chat("judge", [{"role": "user", "content": "q"}])
        await fleet.close()
        await runner.cleanup()
        assert seen == ["Bearer secret-1", "Bearer secret-2"]
        assert "secret" not in repr(vars(client)) and "secret" not in repr(routing)

    asyncio.run(main())


def test_an_undeclared_name_is_refused() -> None:
    routing = from_model_config({"m": [{"ip_addr": "h", "port": 1}]}, source="x", name="x")
    with pytest.raises(ConfigError, match="neither a role nor a declared model"):
        routing.chat_target("OPENAI")
