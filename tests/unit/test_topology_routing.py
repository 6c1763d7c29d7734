"""`routing: {affinity, load_factor}` per model: located errors, the Target and pool it reaches, --affinity."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from orchestra_ops.client.affinity import Affinity
from orchestra_ops.client.fleet_client import FleetClient
from orchestra_ops.client.sources import load_routing
from orchestra_ops.config.loader import load_topology
from orchestra_ops.config.model_spec import ModelRouting
from orchestra_ops.errors import TopologyError
from orchestra_ops.fleet.plan import plan
from tests.unit.test_routing import write_fleet

HEADER = """\
name: t
backend: local
nodes:
  n: {host: localhost, gpus: 0}
models:
  a:
    model: sim/a
    engine: sim
    node: n
    gpus_per_replica: 0
    port: 9000
"""


@pytest.mark.parametrize(("routing", "expected"), [
    ("{affinity: sticky}", "t.yaml:12: models.a.routing.affinity: 'sticky' is not one of 'session' or 'none'"),
    ("{load_factor: 0.9}", "t.yaml:12: models.a.routing.load_factor: Input should be greater than or equal to 1 "
                           "(got 0.9)"),
    ("{load_factor: .inf}", "t.yaml:12: models.a.routing.load_factor: Input should be a finite number"),
    ("{afinity: none}", "t.yaml:12: models.a.routing.afinity: unknown key 'afinity'; did you mean `affinity`?"),
    ("{zzz: 1}", "t.yaml:12: models.a.routing.zzz: unknown key 'zzz'; valid keys: "
                 f"{', '.join(ModelRouting.model_fields)}"),
])
def test_a_bad_routing_setting_names_its_line_and_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        routing: str, expected: str) -> None:
    monkeypatch.chdir(tmp_path)
    Path("t.yaml").write_text(HEADER + f"    routing: {routing}\n")
    with pytest.raises(TopologyError) as info:
        load_topology("t.yaml")
    assert info.value.problems == [expected]


def test_the_default_is_session_affinity_at_1_25(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(HEADER)
    routing = load_topology(path).models["a"].routing
    assert (routing.affinity, routing.load_factor) == ("session", 1.25)


def test_the_topology_setting_reaches_the_pool_and_affinity_overrides_its_mode(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPS_HOME", str(tmp_path / "ops"))
    topo = write_fleet(tmp_path)
    text = topo.read_text()
    assert "    request_timeout_s: 45\n" in text
    topo.write_text(text.replace("    request_timeout_s: 45\n", textwrap.indent(
        "request_timeout_s: 45\nrouting: {affinity: none, load_factor: 1.5}\n", "    ")))
    routing = load_routing(str(topo))
    assert routing.targets["answer"].affinity == Affinity("none", 1.5)
    assert routing.targets["judge"].affinity == Affinity("none")  # a provider: one endpoint, no header
    pool = FleetClient(routing).client("responder").pool
    assert pool.affinity == Affinity("none", 1.5) and pool.sessions is None
    pool = FleetClient(routing.with_affinity("session")).client("responder").pool
    assert pool.affinity == Affinity("session", 1.5) and pool.sessions is not None
    assert pool.sessions.load_factor == 1.5


def test_the_sims_prefix_cache_and_decode_slowdown_reach_its_command(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(HEADER + "    sim: {prefill_ms_per_token: 0.05, decode_slowdown: 0.1,\n"
                             "          prefix_cache_tokens: 1048576}\n")
    argv = list(plan(load_topology(path), state_dir="/s").by_name("a/0").argv)
    assert argv[argv.index("--prefill-ms-per-token"):argv.index("--seed")] == [
        "--prefill-ms-per-token", "0.05", "--decode-ms-per-token", "0", "--jitter", "0", "--startup-delay-s", "0",
        "--decode-slowdown", "0.1", "--prefix-cache-tokens", "1048576"]
    path.write_text(HEADER + "    sim: {prefix_cache_tokens: -1}\n")
    with pytest.raises(TopologyError) as info:
        load_topology(path)
    assert info.value.problems == [f"{path}:12: models.a.sim.prefix_cache_tokens: Input should be greater than or "
                                   "equal to 0 (got -1)"]
