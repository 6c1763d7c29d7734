"""`ops export --format mlflow|wandb`: a real MLflow tracking server (loopback, SQLite backend, stopped
by pid) read back with MLflow's client, an idempotent re-export, and an offline W&B run read back
from its files (tests/wandb_log.py reads the transaction log itself)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.adapters import make_adapter
from tests.helpers import free_port, kill_tree, run_ops
from tests.simserver import SimServer
from tests.wandb_log import parsed

BASE, FT = "sim/base", "ft"


@pytest.fixture
def run_dir(tmp_path: Path, sim_server: Callable[..., SimServer]) -> Path:
    """A finished `ops eval opencompass` run (analysed: stats, plots, report.html)."""
    adapter = make_adapter(tmp_path / "ft")
    sim = sim_server(BASE, args=["--latency-ms", "2", "--enable-lora", "--lora-modules", f"{FT}={adapter}"])
    config = tmp_path / "mc.json"
    config.write_text(json.dumps({BASE: [{"ip_addr": "127.0.0.1", "port": sim.port}],
                                  FT: [{"ip_addr": "127.0.0.1", "port": sim.port}]}))
    out = tmp_path / "run"
    proc = run_ops(["eval", "opencompass", "--model-config", str(config), "--run-dir", str(out), "--model", BASE,
                    "--model", FT, "--datasets", "gsm8k,mmlu"], timeout=240)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture
def mlflow_server(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    log = open(tmp_path / "mlflow.log", "w")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
                             "--workers", "1", "--backend-store-uri", f"sqlite:///{tmp_path / 'mlflow.db'}",
                             "--artifacts-destination", str(tmp_path / "mlartifacts")],
                            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp_path, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, (tmp_path / "mlflow.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=3) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the MLflow server did not answer /health in 180 s"
            time.sleep(1)
        yield uri
    finally:
        kill_tree(proc.pid)
        log.close()


def test_mlflow_round_trip_and_idempotent_reexport(run_dir: Path, mlflow_server: str, tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    first = run_ops(["export", str(run_dir), "--format", "mlflow", "--tracking-uri", mlflow_server,
                     "--experiment", "posttrain", "--json"], timeout=180)
    assert first.returncode == 0, first.stderr
    done = json.loads(first.stdout)
    assert done["created"] is True and done["changed_params"] == []

    client = MlflowClient(tracking_uri=mlflow_server)
    run = client.get_run(done["run_id"])
    info = json.loads((run_dir / "run.json").read_text())
    scores = json.loads((run_dir / "scores.json").read_text())
    stats = json.loads((run_dir / "analysis" / "stats.json").read_text())
    params, metrics, tags = run.data.params, run.data.metrics, run.data.tags
    assert params["suite"] == "opencompass" and params["suite_options.datasets"] == "gsm8k,mmlu"
    assert params["dataset_sha256"] == info["dataset_sha256"] and params["ids_count"] == "160"
    assert params["models"] == json.dumps([BASE, FT])
    assert params["templates.gsm8k.question.sha256"] == info["templates"]["gsm8k.question"]["sha256"]
    assert "invocations" not in params and not any(k.startswith("cli.") for k in params)
    assert metrics["headline/gsm8k/scores/sim/base"] == scores["headline"]["gsm8k"]["scores"][BASE]
    assert metrics["headline/mmlu/comparisons/ft/difference"] == scores["headline"]["mmlu"]["comparisons"][FT][
        "difference"]
    assert metrics["headline/mmlu/comparisons/ft/ci95/1"] == scores["headline"]["mmlu"]["comparisons"][FT]["ci95"][1]
    assert metrics["latency/model/sim/base/p50"] == pytest.approx(stats["by_model"][BASE]["p50"])
    assert metrics["latency/model/ft/p99"] == pytest.approx(stats["by_model"][FT]["p99"])
    assert metrics["calls/model_calls"] == 160.0 and metrics["tasks/ok"] == 160.0
    assert tags["ops.suite"] == "opencompass" and tags["ops.run_dir"] == str(run_dir.resolve())
    assert run.info.status == "FINISHED" and run.info.run_name == "run"

    top = {a.path for a in client.list_artifacts(done["run_id"])}
    assert {"scores.json", "run.json", "summary", "analysis"} <= top
    assert {a.path for a in client.list_artifacts(done["run_id"], "summary")} == {"summary/summary.csv",
                                                                                  "summary/summary.md"}
    analysis = {a.path for a in client.list_artifacts(done["run_id"], "analysis")}
    assert "analysis/report.html" in analysis and "analysis/plots" in analysis
    plots = [a.path for a in client.list_artifacts(done["run_id"], "analysis/plots")]
    assert plots and all(p.endswith(".png") for p in plots)
    got = Path(client.download_artifacts(done["run_id"], "summary/summary.csv", str(tmp_path / "dl")))
    assert got.read_bytes() == (run_dir / "summary" / "summary.csv").read_bytes()

    again = run_ops(["export", str(run_dir), "--format", "mlflow", "--tracking-uri", mlflow_server,
                     "--experiment", "posttrain", "--json"], timeout=180)
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)
    assert (second["run_id"], second["created"], second["metrics_logged"]) == (done["run_id"], False, 0)
    experiment = client.get_experiment_by_name("posttrain")
    assert len(client.search_runs([experiment.experiment_id])) == 1
    assert len(client.get_metric_history(done["run_id"], "headline/gsm8k/scores/ft")) == 1
    assert client.get_run(done["run_id"]).data.params == params

    shown = run_ops(["export", str(run_dir), "--format", "mlflow", "--tracking-uri", mlflow_server,
                     "--experiment", "posttrain"], timeout=180)
    assert shown.returncode == 0 and f"updated MLflow run {done['run_id']}" in shown.stdout


def test_mlflow_needs_a_tracking_uri(run_dir: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    proc = subprocess.run([sys.executable, "-m", "orchestra_ops", "export", str(run_dir), "--format", "mlflow"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2
    assert "error: --format mlflow needs --tracking-uri URI (or $MLFLOW_TRACKING_URI)" in proc.stderr


def _items(message: Any, field: str) -> dict[str, Any]:
    return {(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in getattr(message, field)}


def test_wandb_offline_run_read_back_from_its_files(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "wandb-out"
    proc = run_ops(["export", str(run_dir), "--format", "wandb", "--out", str(out), "--project", "pt", "--json"],
                   timeout=180, env={"WANDB_MODE": "offline", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    written = json.loads(proc.stdout)
    offline = Path(written["offline_run_dir"])
    assert offline.parent == out / "wandb" and offline.name.startswith("offline-run-")
    assert offline.name.endswith(written["run_id"])
    records = parsed(offline / f"run-{written['run_id']}.wandb")
    kinds = [k for k, _ in records]
    assert kinds[0] == "header" and kinds.count("run") == 1 and kinds[-1] == "exit"

    run = next(m for k, m in records if k == "run")
    assert (run.run_id, run.project, run.display_name) == (written["run_id"], "pt", "run")
    config = {u.key: json.loads(u.value_json) for u in run.config.update}
    info = json.loads((run_dir / "run.json").read_text())
    assert config["suite"] == "opencompass" and config["dataset_sha256"] == info["dataset_sha256"]
    assert config["suite_options.datasets"] == "gsm8k,mmlu"

    scores = json.loads((run_dir / "scores.json").read_text())
    history = [_items(m, "item") for k, m in records if k == "history"]
    assert len(history) == 1 and history[0]["_step"] == 0
    assert history[0]["headline/gsm8k/scores/ft"] == scores["headline"]["gsm8k"]["scores"][FT]
    summary: dict[str, Any] = {}
    for kind, message in records:
        if kind == "summary":
            summary.update(_items(message, "update"))
    assert summary["headline/mmlu/scores/sim/base"] == scores["headline"]["mmlu"]["scores"][BASE]
    stats = json.loads((run_dir / "analysis" / "stats.json").read_text())
    assert summary["latency/model/sim/base/p90"] == pytest.approx(stats["by_model"][BASE]["p90"])

    files = {f.path for k, m in records if k == "files" for f in m.files}
    assert {"scores.json", "run.json", "summary/summary.csv", "analysis/report.html"} <= files
    assert (offline / "files" / "summary" / "summary.csv").read_bytes() == \
        (run_dir / "summary" / "summary.csv").read_bytes()
