"""Runtime adapters survive a repair: kill -9 a replica that serves `ft` (loaded with `ops lora load`), `ops up`
restarts it and loads `ft` into the new process again; `ops restart` does the same; an adapter the new process
cannot take is unloaded everywhere (all or none) and reported (exit 3). Real sim replicas, real SIGKILL."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from orchestra_ops.core import procs
from tests.adapters import make_adapter
from tests.chaos.adapter_fixtures import BASE, SimFleet, fleet_of


@pytest.fixture
def sim_fleet(tmp_path: Path) -> Iterator[SimFleet]:
    yield from fleet_of(tmp_path)


def kill9(pid: int) -> None:
    created = psutil.Process(pid).create_time()
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while procs.is_alive(pid, created):
        assert time.monotonic() < deadline, f"pid {pid} still alive 30 s after SIGKILL"
        time.sleep(0.05)


def replica_refs(fleet: SimFleet) -> list[tuple[str, int]]:
    return [(r["name"], r["pid"]) for r in fleet.records()["ft"]["replicas"]]


def test_up_and_restart_load_the_runtime_adapter_into_the_new_process(sim_fleet: SimFleet, tmp_path: Path) -> None:
    topology = sim_fleet.topology()
    sim_fleet.up()
    adapter = make_adapter(tmp_path / "ft")
    assert sim_fleet.ops("lora", "load", "ft", str(adapter), "--model", "answer").returncode == 0
    endpoints = sim_fleet.endpoints()
    assert endpoints["ft"] == endpoints[BASE]
    old = sim_fleet.pid("answer/1")

    kill9(old)
    up = sim_fleet.ops("up", str(topology))
    assert up.returncode == 0, up.stderr
    assert "ad: restarted answer/1" in up.stderr
    assert "ad: runtime adapter 'ft' into answer/1 loaded again" in up.stderr
    new = sim_fleet.pid("answer/1")
    assert new != old
    assert sim_fleet.served() == [{"ft": str(adapter)}, {"ft": str(adapter)}]
    assert sim_fleet.endpoints() == endpoints  # ft keeps both replicas
    assert replica_refs(sim_fleet) == [("answer/0", sim_fleet.pid("answer/0")), ("answer/1", new)]

    # the reproduction went on: loading it again said "'ft' is served nowhere" (exit 3); now it is
    # served from that dir by both, so both are adopted
    again = sim_fleet.ops("lora", "load", "ft", str(adapter), "--model", "answer", "--json")
    assert again.returncode == 0, again.stderr
    assert [r["message"] for r in json.loads(again.stdout)["replicas"]] == [
        f"already serves 'ft' from {adapter}: adopted"] * 2

    restarted = sim_fleet.ops("restart", "answer/0")
    assert restarted.returncode == 0, restarted.stderr
    assert "ad: runtime adapter 'ft' into answer/0 loaded again" in restarted.stderr
    assert sim_fleet.served() == [{"ft": str(adapter)}, {"ft": str(adapter)}]
    assert sim_fleet.endpoints() == endpoints
    assert replica_refs(sim_fleet) == [("answer/0", sim_fleet.pid("answer/0")), ("answer/1", new)]

    run = sim_fleet.ops("eval", "gsm8k", "--model", "ft", "--limit", "3", "--run-dir", "r", "--no-analyze")
    assert run.returncode == 0, run.stderr  # both replicas answer as ft
    records = [json.loads(line) for line in (tmp_path / "r" / "results.jsonl").read_text().splitlines()]
    assert [r["status"] for r in records] == ["ok"] * 3


def test_an_adapter_the_new_process_cannot_take_leaves_everywhere(sim_fleet: SimFleet, tmp_path: Path) -> None:
    topology = sim_fleet.topology()
    sim_fleet.up()
    adapter = make_adapter(tmp_path / "ft")
    assert sim_fleet.ops("lora", "load", "ft", str(adapter), "--model", "answer").returncode == 0
    shutil.rmtree(adapter)  # the checkpoint dir was cleaned up since it was loaded
    kill9(sim_fleet.pid("answer/1"))

    up = sim_fleet.ops("up", str(topology))
    assert up.returncode == 3, up.stderr
    assert up.stderr.endswith(
        "error: answer/1 restarted and serving, but:\n"
        f"  'ft' ({adapter}) could not be loaded again into answer/1 (answer/1: answered 404: Loading lora ft "
        "failed: No adapter found for <path>); all or none: unloaded from the model's other replicas too; "
        f"'ft' is served nowhere; `ops lora load ft {adapter} --model answer` to try again\n"), up.stderr
    assert sim_fleet.served() == [{}, {}]
    assert "ft" not in sim_fleet.endpoints() and sim_fleet.records() == {}
    assert sim_fleet.state()["status"] == "up"  # the fleet itself is repaired and recorded
    health = json.loads(sim_fleet.ops("health", "--json").stdout)
    assert [(p["name"], p["state"]) for p in health["processes"]] == [("answer/0", "READY"), ("answer/1", "READY")]
