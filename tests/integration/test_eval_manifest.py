"""run.json is the run's manifest: written before the first request, every hash a real one, no secret."""

from __future__ import annotations

import hashlib
import json
import subprocess
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

from orchestra_ops import __version__
from orchestra_ops.fleet.state import FleetState, write_state
from orchestra_ops.runner.manifest import ids_sha256, redact
from tests.helpers import OPS, REPO, kill_tree, run_ops
from tests.integration.eval_fixtures import dataset, model_config
from tests.simserver import SimServer

SECRET = "sk-manifest-secret-4242"

TOPOLOGY = """\
name: manifesttopo
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
  judge: {kind: openai, model: gpt-x, base_url: "http://127.0.0.1:PORT/v1", api_key_env: MANIFEST_KEY,
          request_defaults: {temperature: 0.0}}
roles:
  responder: answer
  judge: judge
"""


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_run_json_is_a_manifest_without_secrets(tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("gpt-x", args=["--latency-ms", "5"])
    topo = tmp_path / "topo.yaml"
    topo.write_text(textwrap.dedent(TOPOLOGY).replace("PORT", str(sim.port)))
    ops_home = tmp_path / "ops"
    (ops_home / "manifesttopo").mkdir(parents=True)
    endpoints = model_config(ops_home / "manifesttopo" / "model_config.json", {"sim/answer": [sim]})
    write_state(FleetState(name="manifesttopo", topology_file=str(topo), backend="local", status="up",
                           started_at=time.time(), cwd=str(tmp_path)), ops_home / "manifesttopo" / "state.json")
    ids = [f"q{i}" for i in range(12)]
    data = dataset(tmp_path / "d.jsonl", ids)
    run_dir = tmp_path / "run"
    env = {"OPS_HOME": str(ops_home), "MANIFEST_KEY": SECRET}
    proc = run_ops(["eval", "chat", "--model", "judge", "--topology", "manifesttopo", "--dataset", str(data),
                    "--run-dir", str(run_dir), "--limit", "10", "--no-analyze"], env=env)
    assert proc.returncode == 0, proc.stderr
    info = json.loads((run_dir / "run.json").read_text())
    assert info["manifest_version"] == 1 and info["suite"] == "chat"
    assert info["dataset"] == str(data.resolve()) and info["dataset_sha256"] == _sha(data)
    assert (info["ids_sha256"], info["ids_count"]) == (ids_sha256(ids[:10]), 10)  # the ids the run covers
    assert info["topology_sha256"] == _sha(topo) and info["endpoints_sha256"] == _sha(endpoints)
    routing = {r["role"]: r for r in info["routing"]}
    assert routing["responder"] == {"role": "responder", "target": "answer", "kind": "model",
                                    "served_name": "sim/answer", "replicas": 1,
                                    "where": f"127.0.0.1:{sim.port}", "request_defaults": {"max_tokens": 8},
                                    "affinity": {"mode": "session", "load_factor": 1.25}}
    assert routing["judge"]["kind"] == "provider" and routing["judge"]["replicas"] is None
    assert "affinity" not in routing["judge"]  # a provider is one endpoint: no placement to record
    assert info["cli"]["affinity"] is None  # no --affinity: each model's routing.affinity
    assert info["judge"] == {"roles": [routing["judge"]], "options": {}}
    assert "MANIFEST_KEY" in routing["judge"]["where"]  # the variable's name, never its value
    assert (info["cli"]["concurrency"], info["cli"]["limit"], info["cli"]["models"]) == (32, 10, ["judge"])
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    assert info["ops"]["version"] == __version__ and info["ops"]["git_commit"] == commit
    assert [i["mode"] for i in info["invocations"]] == ["new run"]
    for name in ("run.json", "eval.log", "profile.jsonl", "results.jsonl"):
        assert SECRET not in (run_dir / name).read_text(), name

    resumed = run_ops(["eval", "chat", "--topology", "manifesttopo", "--run-dir", str(run_dir), "--resume",
                       "--no-analyze"], env=env)
    assert resumed.returncode == 0, resumed.stderr
    info = json.loads((run_dir / "run.json").read_text())
    assert [i["mode"] for i in info["invocations"]] == ["new run", "resume"]
    assert info["ids_count"] == 10  # a continued run keeps the --limit it started with

    widened = run_ops(["eval", "chat", "--topology", "manifesttopo", "--run-dir", str(run_dir), "--resume",
                       "--limit", "12", "--no-analyze"], env=env)
    assert widened.returncode == 0, widened.stderr
    info = json.loads((run_dir / "run.json").read_text())
    assert info["ids_count"] == 12 and "2 to run" in widened.stdout  # a larger --limit takes in the rest

    data.write_text(data.read_text().replace("capital", "Capital"))  # the questions change under the run dir
    changed = run_ops(["eval", "chat", "--topology", "manifesttopo", "--run-dir", str(run_dir), "--resume"], env=env)
    assert changed.returncode == 2
    assert "the dataset changed" in changed.stderr and "use another --run-dir" in changed.stderr


def test_manifest_is_written_before_the_first_request(tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("m", args=["--latency-ms", "60000"])  # the first requests never finish in this test
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([*OPS, "eval", "chat", "--model-config", str(config), "--run-dir", str(run_dir),
                             "--dataset", str(dataset(tmp_path / "d.jsonl", range(3))), "--concurrency", "3"],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while sim.metrics().get("sim_requests_in_flight", 0) < 1:
            assert proc.poll() is None and time.monotonic() < deadline, "no request reached the sim"
            time.sleep(0.05)
        info = json.loads((run_dir / "run.json").read_text())
        assert info["manifest_version"] == 1 and info["ids_count"] == 3
        assert not (run_dir / "results.jsonl").exists() or (run_dir / "results.jsonl").read_text() == ""
    finally:
        kill_tree(proc.pid)


def test_redact_hides_secret_values_and_keeps_variable_names() -> None:
    assert redact({"api_key": "x", "api_key_env": "OPENAI_API_KEY", "nested": {"Token": "t", "n": 1},
                   "password": None, "temperature": 0.5, "max_tokens": 8, "Authorization": "Bearer x"}) == {
        "api_key": "<redacted>", "api_key_env": "OPENAI_API_KEY", "nested": {"Token": "<redacted>", "n": 1},
        "password": None, "temperature": 0.5, "max_tokens": 8, "Authorization": "<redacted>"}
