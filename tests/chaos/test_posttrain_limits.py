"""`--timeout` bounds every step of `ops posttrain`, a load cut by a signal is rolled back, a rerun adopts an
adapter already served from the same dir, and a limit reached after the last unit still scores. Real sim
replicas (one frozen with SIGSTOP), a real replica whose load never finishes, real signals."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from orchestra_ops.fleet.state import FleetState, ProcessRecord, write_state
from tests.adapters import make_adapter
from tests.chaos.adapter_fixtures import BASE, SimFleet, fleet_of
from tests.helpers import OPS, REPO, free_port, kill_tree, wait_port
from tests.simserver import SimServer


@pytest.fixture
def sim_fleet(tmp_path: Path) -> Iterator[SimFleet]:
    yield from fleet_of(tmp_path)


def test_a_frozen_replica_cannot_hold_posttrain_past_its_limit(sim_fleet: SimFleet, tmp_path: Path) -> None:
    sim_fleet.topology()
    sim_fleet.up()
    adapter = make_adapter(tmp_path / "ft")
    frozen = sim_fleet.pid("answer/1")
    os.kill(frozen, signal.SIGSTOP)
    try:
        # a hang guard, not a timing claim: before, the load waited 300 s on the frozen replica
        proc = sim_fleet.ops("posttrain", "--topology", "ad", "--model", "answer", "--adapter", f"ft={adapter}",
                             "--datasets", "gsm8k", "--timeout", "5", timeout=120)
        assert proc.returncode == 124, proc.stderr
        port = sim_fleet.ports[1]
        assert re.search(rf"error: --timeout 5 s: reached while loading 'ft': cannot load 'ft' into answer: "
                         rf"answer/1 \(127\.0\.0\.1:{port}\): /v1/models did not answer within [0-9.]+ s; nothing "
                         r"was loaded\n  the same call again continues", proc.stderr), proc.stderr
        assert f"loading 'ft' from {adapter} into every replica of answer (at most 5 s)" in proc.stderr
        assert "Traceback" not in proc.stderr
        assert sim_fleet.cards(sim_fleet.ports[0]).keys() == {BASE}  # nothing was loaded anywhere
        assert sim_fleet.records() == {}
    finally:
        os.kill(frozen, signal.SIGCONT)
    assert sim_fleet.served() == [{}, {}]


# A replica whose /v1/models answers at once but whose load never finishes (a huge adapter on a slow disk):
# it takes the POST and holds it; unload answers vLLM's 404 (it never took the adapter).
SLOW_LOADER = """
import asyncio, json, sys
from aiohttp import web
loads = []
async def models(request):
    return web.json_response({"object": "list", "data": [{"id": "sim/base", "root": "sim/base", "parent": None}]})
async def load(request):
    loads.append(await request.json())
    await asyncio.sleep(3600)
async def unload(request):
    return web.json_response({"error": {"message": "The lora adapter 'ft' cannot be found."}}, status=404)
async def seen(request):
    return web.json_response(loads)
app = web.Application()
app.add_routes([web.get("/health", lambda r: web.Response()), web.get("/v1/models", models),
                web.post("/v1/load_lora_adapter", load), web.post("/v1/unload_lora_adapter", unload),
                web.get("/seen", seen)])
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None)
"""


def _record(name: str, pid: int, port: int) -> ProcessRecord:
    proc = psutil.Process(pid)
    return ProcessRecord(name=name, group="base", kind="sim", pid=pid, pgid=os.getpgid(pid), sid=None,
                         create_time=proc.create_time(), host="127.0.0.1", port=port, log="", argv=[], env={},
                         served_model_name=BASE, endpoint_key=BASE)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_during_the_load_rolls_it_back(tmp_path: Path, sig: signal.Signals) -> None:
    adapter = make_adapter(tmp_path / "ft")
    sim = SimServer(BASE, args=["--enable-lora", "--latency-ms", "1"], log_dir=tmp_path,
                    env={"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "1"}).start()
    slow_port = free_port()
    slow = subprocess.Popen([sys.executable, "-c", SLOW_LOADER, str(slow_port)], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    loader: subprocess.Popen[str] | None = None
    try:
        wait_port(slow_port, timeout=60)
        topology = tmp_path / "lr.yaml"
        topology.write_text(textwrap.dedent(f"""\
            name: lr
            nodes: {{cpu: {{host: localhost, gpus: 0}}}}
            models:
              base: {{model: {BASE}, engine: sim, node: cpu, replicas: 2, gpus_per_replica: 0, port: {sim.port},
                     runtime_lora: true}}
            """))
        home = tmp_path / "home" / "lr"
        home.mkdir(parents=True)
        endpoints = home / "model_config.json"
        endpoints.write_text(json.dumps({BASE: [{"ip_addr": "127.0.0.1", "port": p} for p in (sim.port, slow_port)]}))
        write_state(FleetState(name="lr", topology_file=str(topology), backend="local", status="up",
                               started_at=time.time(), cwd=str(tmp_path),
                               processes=[_record("base/0", sim.pid, sim.port), _record("base/1", slow.pid, slow_port)],
                               endpoints_file=str(endpoints)), home / "state.json")
        before = endpoints.read_text()
        env = {**os.environ, "OPS_HOME": str(tmp_path / "home")}
        loader = subprocess.Popen([*OPS, "lora", "load", "ft", str(adapter), "--topology", "lr"], cwd=tmp_path,
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # base/0 took it and base/1 holds the POST: the load is under way
            took = "ft" in {c["id"] for c in httpx.get(f"{sim.base_url}/v1/models", timeout=10).json()["data"]}
            if took and httpx.get(f"http://127.0.0.1:{slow_port}/seen", timeout=10).json():
                break
            time.sleep(0.05)
        else:
            pytest.fail("the load never reached both replicas")
        loader.send_signal(sig)
        out, err = loader.communicate(timeout=120)
        assert out == ""
        assert loader.returncode == 130, err
        assert err == (f"error: interrupted ({sig.name}) while loading 'ft' into base\n"
                       "  rolled back: unloaded again from base/0\n"
                       "  'ft' is served nowhere\n")
        assert {c["id"] for c in httpx.get(f"{sim.base_url}/v1/models", timeout=10).json()["data"]} == {BASE}
        assert endpoints.read_text() == before
        assert not (home / "lora.json").exists()
    finally:
        if loader is not None and loader.poll() is None:
            loader.kill()
            loader.wait()
        kill_tree(slow.pid)
        slow.wait()
        sim.stop()


def test_a_rerun_adopts_what_is_served_from_the_same_dir(sim_fleet: SimFleet, tmp_path: Path) -> None:
    topology = sim_fleet.topology()
    sim_fleet.up()
    adapter, other = make_adapter(tmp_path / "ckpt-200"), make_adapter(tmp_path / "ckpt-400")
    assert sim_fleet.ops("lora", "load", "ft", str(adapter), "--model", "answer").returncode == 0
    records = sim_fleet.home / "ad" / "lora.json"
    records.unlink()  # what ops remembered is gone (a crash between load and record, a hand edit)

    elsewhere = sim_fleet.ops("lora", "load", "ft", str(other), "--model", "answer")
    assert elsewhere.returncode == 2
    assert elsewhere.stderr == (f"error: 'ft' is already served by answer/0 from {adapter}, not {other}; "
                                "`ops lora unload ft --model answer` first\n")
    assert sim_fleet.served() == [{"ft": str(adapter)}, {"ft": str(adapter)}]  # untouched

    # posttrain with the same dir: the replicas serve it already, so they are adopted, not loaded twice
    # (vLLM would refuse: "has already been loaded"); at the end it is unloaded as usual. The gate is not what
    # this is about: no drop exceeds 101 points, so it passes
    proc = sim_fleet.ops("posttrain", "--topology", str(topology), "--model", "answer", "--adapter",
                         f"ft={adapter}", "--datasets", "gsm8k", "--sample", "4", "--max-drop", "101")
    assert proc.returncode == 0, proc.stderr
    assert "'ft' is served by 2 replica(s) of answer (2 already served it from the same dir)" in proc.stderr
    assert "served nowhere" not in proc.stderr + proc.stdout
    assert sim_fleet.served() == [{}, {}]
    assert sim_fleet.records() == {}


def test_a_limit_reached_after_the_last_unit_still_scores(sim_fleet: SimFleet, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestra_ops.api import EvalOptions, evaluate

    sim_fleet.topology(replicas=1)
    sim_fleet.up()
    first = sim_fleet.ops("eval", "gsm8k", "--model", "answer", "--limit", "5", "--run-dir", "r", "--no-analyze")
    assert first.returncode == 0, first.stderr
    scores = json.loads((tmp_path / "r" / "scores.json").read_text())
    monkeypatch.setenv("OPS_HOME", str(sim_fleet.home))
    monkeypatch.chdir(tmp_path)
    # every unit has its result; the limit (1 ms) passes before the run can even look: it scores, no RunTimeout
    result = evaluate(EvalOptions(run_dir=str(tmp_path / "r"), resume=True, model="answer", topology="ad",
                                  wall_timeout_s=0.001), "gsm8k", analyze=False)
    assert (result.ran, result.missing) == (0, 0)
    assert result.scores is not None and result.scores["datasets"] == scores["datasets"]
    assert json.loads((tmp_path / "r" / "live.json").read_text())["state"] == "finished"
