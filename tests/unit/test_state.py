"""state.json: round trip, atomic writes, errors that name the file, which topology is "latest"."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from orchestra_ops.core.paths import latest_topology_name, state_path
from orchestra_ops.errors import StateError
from orchestra_ops.fleet.state import (
    FleetState,
    NodeRecord,
    ProcessRecord,
    Status,
    read_state,
    resolve_name,
    write_state,
)


@pytest.fixture(autouse=True)
def ops_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPS_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _record(name: str = "m/0", pid: int = 4242) -> ProcessRecord:
    return ProcessRecord(name=name, group="m", kind="sim", pid=pid, pgid=pid, sid=pid, create_time=1700000000.25,
                         host="127.0.0.1", port=18100, log="/tmp/m-0.log", argv=["ops", "serve", "sim"],
                         env={"PYTHONUNBUFFERED": "1"}, served_model_name="sim/m", endpoint_key="sim/m")


def _state(name: str = "t", status: Status = "up") -> FleetState:
    return FleetState(name=name, topology_file=f"/abs/{name}.yaml", backend="local", status=status,
                      started_at=1700000000.0, cwd="/abs", processes=[_record(), _record("m/1", 4243)])


def test_round_trip_keeps_every_field() -> None:
    state = _state()
    path = write_state(state)
    assert path == state_path("t")
    assert read_state("t") == state
    raw = json.loads(path.read_text())
    assert raw["name"] == "t" and raw["status"] == "up" and raw["topology_file"] == "/abs/t.yaml"
    assert raw["processes"][0]["create_time"] == 1700000000.25


def test_unknown_fields_from_a_newer_version_are_ignored() -> None:
    raw = _state().to_json()
    raw["future"] = 1
    raw["processes"][0]["future"] = 2
    state_path("t").parent.mkdir(parents=True)
    state_path("t").write_text(json.dumps(raw))
    assert read_state("t").processes[0].name == "m/0"


def test_write_is_atomic_no_temp_files_left() -> None:
    write_state(_state())
    write_state(_state().with_status("down"))
    assert sorted(p.name for p in state_path("t").parent.iterdir()) == ["state.json"]
    assert read_state("t").status == "down"


@pytest.mark.parametrize("content, fragment", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"name": "t"}', "not a state file this version understands"),
])
def test_read_errors_name_the_file(content: str, fragment: str) -> None:
    path = state_path("t")
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with pytest.raises(StateError) as info:
        read_state("t")
    assert str(path) in str(info.value) and fragment in str(info.value)


def test_missing_state_is_a_state_error() -> None:
    with pytest.raises(StateError, match="no state"):
        read_state("nope")


def test_latest_counts_only_topologies_that_are_up() -> None:
    assert latest_topology_name() is None
    write_state(_state("old"))
    write_state(_state("new"))
    os.utime(state_path("old"), (time.time() - 100, time.time() - 100))
    assert latest_topology_name() == "new"
    write_state(_state("new", status="down"))
    assert latest_topology_name() == "old"
    assert latest_topology_name(up_only=False) == "new"
    assert resolve_name(None) == "old"
    assert resolve_name("explicit") == "explicit"


def test_resolve_name_without_any_up_topology() -> None:
    write_state(_state("gone", status="down"))
    with pytest.raises(StateError, match="no topology is up"):
        resolve_name(None)
    assert resolve_name(None, up_only=False) == "gone"


def test_by_name_lists_known_processes() -> None:
    with pytest.raises(StateError, match="m/0, m/1"):
        _state().by_name("x/9")


def test_reproduce_is_quoted() -> None:
    record = _record()
    assert record.reproduce == "env PYTHONUNBUFFERED=1 ops serve sim"


def test_a_version_1_state_reads_as_one_node_of_its_backend() -> None:
    v1 = {"name": "old", "topology_file": "/abs/old.yaml", "backend": "tmux", "status": "up", "started_at": 1.0,
          "cwd": "/abs", "tmux_socket": "sock", "tmux_session": "ops-old", "provider_key_envs": [], "version": 1,
          "processes": [{"name": "m/0", "group": "m", "kind": "sim", "pid": 4242, "pgid": 4242, "sid": 4242,
                         "create_time": 1.5, "host": "127.0.0.1", "port": 18100, "log": "/l/m-0.log",
                         "argv": ["ops"], "env": {}, "served_model_name": "sim/m", "endpoint_key": "sim/m",
                         "log_offset": 7, "tmux_window": "@3"}]}
    state = FleetState.from_json(v1)
    assert state.version == 2
    assert state.nodes == [NodeRecord(name="this-machine", backend="tmux", host="127.0.0.1",
                                      handle={"socket": "sock", "session": "ops-old"})]
    record = state.processes[0]
    assert (record.node, record.backend, record.pid, record.log_offset, record.handle) == (
        "this-machine", "tmux", 4242, 7, {"window": "@3"})
    assert state.processes_of("this-machine") == [record]


def test_with_node_gives_its_processes_the_host_slurm_allocated() -> None:
    record = ProcessRecord(name="a/0", group="a", kind="sim", node="gpu", backend="slurm", host=None, port=1,
                           log="/l", argv=["x"], env={}, served_model_name="m", endpoint_key="m")
    state = FleetState(name="t", topology_file="/t.yaml", status="up", started_at=1.0, cwd="/",
                       nodes=[NodeRecord(name="gpu", backend="slurm", host=None, handle={"job_id": "7"})],
                       processes=[record, _record()])
    assert state.processes[0].base_url is None
    updated = state.with_node(NodeRecord(name="gpu", backend="slurm", host="node17", handle={"job_id": "7"}))
    assert updated.node("gpu").host == "node17"
    assert updated.processes[0].base_url == "http://node17:1"
    assert updated.processes[1] == state.processes[1]  # another node's process is untouched
    write_state(updated)
    assert read_state("t") == updated
