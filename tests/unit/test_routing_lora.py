"""An adapter name routes to its base model's replicas with the adapter as the request's model (vLLM's way)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from orchestra_ops.client.routing import from_model_config, from_topology
from orchestra_ops.client.sources import load_routing
from orchestra_ops.config.loader import load_topology
from orchestra_ops.errors import ConfigError
from orchestra_ops.fleet.lora.loaded import LoadedAdapter, write_records
from tests.adapters import make_adapter


@pytest.fixture
def topology(tmp_path: Path) -> Path:
    make_adapter(tmp_path / "st")
    path = tmp_path / "t.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: rl
        nodes: {{cpu: {{host: localhost, gpus: 0}}}}
        models:
          answer:
            model: sim/answer
            engine: sim
            node: cpu
            gpus_per_replica: 0
            replicas: 2
            port: 18500
            max_model_len: 4096
            request_defaults: {{temperature: 0}}
            request_timeout_s: 45
            runtime_lora: true
            lora_modules: {{st: {tmp_path / 'st'}}}
        roles: {{candidate: answer, tuned: st}}
        """))
    return path


ENDPOINTS = {"sim/answer": [{"ip_addr": "127.0.0.1", "port": 18500}, {"ip_addr": "127.0.0.1", "port": 18501}],
             "st": [{"ip_addr": "127.0.0.1", "port": 18500}, {"ip_addr": "127.0.0.1", "port": 18501}],
             "ft": [{"ip_addr": "127.0.0.1", "port": 18501}]}


def test_declared_and_runtime_adapters_are_targets_on_the_base_replicas(topology: Path) -> None:
    routing = from_topology(load_topology(topology), ENDPOINTS, source=str(topology), endpoints_file="mc.json",
                            adapters={"ft": "answer"})
    base = routing.chat_target("candidate")
    st = routing.chat_target("tuned")
    ft = routing.chat_target("ft")
    assert (base.served_name, base.adapter_of) == ("sim/answer", None)
    assert (st.name, st.served_name, st.adapter_of, st.addresses) == (
        "st", "st", "answer", (("127.0.0.1", 18500), ("127.0.0.1", 18501)))
    assert (ft.served_name, ft.addresses) == ("ft", (("127.0.0.1", 18501),))
    # the base model's settings carry over: context limit, defaults, timeout
    assert (ft.max_model_len, dict(ft.request_defaults), ft.request_timeout_s) == (4096, {"temperature": 0}, 45)
    assert ft.where == "127.0.0.1:18501 (LoRA adapter on answer)"


def test_an_adapter_no_replica_serves_is_a_clear_error(topology: Path) -> None:
    endpoints = {k: v for k, v in ENDPOINTS.items() if k != "ft"}
    routing = from_topology(load_topology(topology), endpoints, source=str(topology), endpoints_file="mc.json",
                            adapters={"ft": "answer"})
    with pytest.raises(ConfigError, match=r"adapter 'ft' is served by no replica of answer in mc.json; "
                                          r"`ops lora load ft PATH --model answer`"):
        routing.chat_target("ft")
    with pytest.raises(ConfigError, match="'gone' is neither a role nor a declared model"):
        routing.chat_target("gone")


def test_load_routing_reads_the_runtime_adapters_ops_lora_load_recorded(topology: Path, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPS_HOME", str(tmp_path / "home"))
    (tmp_path / "home" / "rl").mkdir(parents=True)
    (tmp_path / "home" / "rl" / "model_config.json").write_text(json.dumps(ENDPOINTS))
    write_records("rl", {"ft": LoadedAdapter("ft", "answer", "/x/ft", 1.0)})
    routing = load_routing(str(topology))
    assert routing.chat_target("ft").adapter_of == "answer"
    # what the response cache keys each name on (client/identity.py): the recorded and the declared directory
    assert (routing.chat_target("ft").adapter_path, routing.chat_target("tuned").adapter_path) == (
        "/x/ft", str(tmp_path / "st"))
    assert routing.chat_target("candidate").adapter_path is None and routing.declared
    assert from_model_config(ENDPOINTS, source="mc.json", name="mc").declared is False


def test_an_endpoints_file_alone_routes_adapter_keys_as_models() -> None:
    routing = from_model_config(ENDPOINTS, source="mc.json", name="mc")
    assert routing.chat_target("ft").served_name == "ft"
