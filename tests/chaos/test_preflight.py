"""Preflight: a fleet whose processes are all dead is exit 3 before the first task, naming what is
down and how to bring it up; a role with one live replica of two runs; providers are not probed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestra_ops.client.routing import Routing, Target
from orchestra_ops.errors import LaunchError
from orchestra_ops.runner.preflight import check_live
from tests.chaos.chaos_fixtures import start_sim
from tests.helpers import free_port, run_ops
from tests.integration.agent_fixtures import write_fleet
from tests.integration.eval_fixtures import dataset, model_config, results


def test_a_fleet_whose_sims_are_all_dead_exits_3_at_once(tmp_path: Path) -> None:
    sims = [start_sim(tmp_path, "sim/answer"), start_sim(tmp_path, "sim/answer")]
    home = tmp_path / "ops"
    topology = write_fleet(home, {"answer": (sims[0], {})}, {"responder": "answer"}, name="pre")
    (home / "pre" / "model_config.json").write_text(json.dumps(
        {"sim/answer": [{"ip_addr": "127.0.0.1", "port": s.port} for s in sims]}))
    for sim in sims:
        sim.stop()
    run_dir = tmp_path / "run"
    proc = run_ops(["eval", "chat", "--no-analyze", "--topology", str(topology), "--model", "responder",
                    "--dataset", str(dataset(tmp_path / "d.jsonl", range(50))), "--run-dir", str(run_dir)],
                   env={"OPS_HOME": str(home)}, timeout=60)  # unprobed, 50 tasks would wait 60 s each
    assert proc.returncode == 3, proc.stderr
    down = "; ".join(f"127.0.0.1:{s.port} connection refused (nothing listens there)" for s in sims)
    lines = proc.stderr.splitlines()
    assert lines[0] == "error: preflight: 1 model(s) this run calls has no live replica (nothing was run):"
    assert lines[1] == f"  role responder -> model answer (served as 'sim/answer'): {down}"
    assert f"bring it up with `ops up {topology}`" in lines[2]
    assert "Traceback" not in proc.stderr
    assert not (run_dir / "results.jsonl").exists() or results(run_dir) == []
    assert "preflight" in (run_dir / "eval.log").read_text()


def test_one_live_replica_of_two_is_enough(tmp_path: Path) -> None:
    sim = start_sim(tmp_path)
    try:
        config = tmp_path / "mc.json"
        model_config(config, {"m": [sim]})
        entries = json.loads(config.read_text())
        entries["m"].append({"ip_addr": "127.0.0.1", "port": free_port()})  # nothing listens there
        config.write_text(json.dumps(entries))
        run_dir = tmp_path / "run"
        proc = run_ops(["eval", "chat", "--no-analyze", "--model-config", str(config), "--run-dir", str(run_dir),
                        "--dataset", str(dataset(tmp_path / "d.jsonl", range(20)))])
        assert proc.returncode == 0, proc.stderr
        assert sorted(r["id"] for r in results(run_dir) if r["status"] == "ok") == list(range(20))
    finally:
        sim.stop()


def test_dead_models_are_named_and_providers_are_not_probed(tmp_path: Path) -> None:
    dead = free_port()
    targets: dict[str, Any] = {
        "judge": Target(name="judge", kind="provider", served_name="gpt-x", base_url=f"http://127.0.0.1:{dead}/v1"),
        "m": Target(name="m", kind="model", served_name="m", addresses=(("127.0.0.1", dead),)),
    }
    routing = Routing(source="t.yaml", name="t", endpoints_file="/x/model_config.json", roles={"judge": "judge"},
                      targets=targets)
    check_live(routing, ["judge"])  # an external provider: no probe, no error
    with pytest.raises(LaunchError) as caught:
        check_live(routing, ["m"], timeout_s=2)
    assert caught.value.exit_code == 3
    assert f"role m -> model m (served as 'm'): 127.0.0.1:{dead} " in str(caught.value)
    assert "`ops up t.yaml`" in str(caught.value)
