"""A run dir made before the suites became packages records its bundled dataset at the old place
(…/evals/data/…): it still resumes, `ops eval-status` still counts it, and every old place maps to one
that exists (runner/rundir.py: MOVED_BUNDLED_DATA)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from orchestra_ops.runner.rundir import MOVED_BUNDLED_DATA, recorded_dataset
from tests.helpers import REPO, run_ops
from tests.simserver import SimServer

OLD = REPO / "evals"  # the old layout: evals/data/…, under the same evals folder


def test_every_old_bundled_place_maps_to_one_that_exists() -> None:
    for old, new in MOVED_BUNDLED_DATA.items():
        assert not (OLD / old).exists()
        assert recorded_dataset(str(OLD / old)) == str(OLD / new)
        assert (OLD / new).exists()
    assert recorded_dataset(str(OLD / "data" / "mmlu")) == str(OLD / "opencompass" / "data" / "mmlu")
    assert recorded_dataset(str(OLD / "data" / "tau2" / "domains" / "synthetic")) == str(
        OLD / "tau2" / "data" / "domains" / "synthetic")
    assert recorded_dataset("/elsewhere/evals/data/mine.jsonl") == "/elsewhere/evals/data/mine.jsonl"
    assert recorded_dataset(str(OLD / "data" / "not_bundled.jsonl")) == str(OLD / "data" / "not_bundled.jsonl")


def test_a_run_dir_from_before_the_move_resumes(tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("sim/base", args=["--latency-ms", "5"])
    config = tmp_path / "mc.json"
    config.write_text(json.dumps({"sim/base": [{"ip_addr": "127.0.0.1", "port": sim.port}]}))
    run_dir = tmp_path / "run"
    base = ["eval", "gsm8k", "--no-analyze", "--model-config", str(config), "--model", "sim/base",
            "--run-dir", str(run_dir), "--limit", "6"]
    first = run_ops(base, timeout=180)  # the bundled set (no --dataset)
    assert first.returncode == 0, first.stderr
    info_file, results = run_dir / "run.json", run_dir / "results.jsonl"
    info = json.loads(info_file.read_text())
    assert info["dataset"] == str(REPO / "evals" / "opencompass" / "data" / "gsm8k")
    info["dataset"] = str(OLD / "data" / "gsm8k")  # as a run dir made before the move recorded it
    info_file.write_text(json.dumps(info))
    lines = results.read_text().splitlines()
    results.write_text("\n".join(lines[:4]) + "\n")  # two units have no result yet

    status = json.loads(run_ops(["eval-status", str(run_dir), "--json"]).stdout)
    assert (status["dataset_size"], status["missing"]) == (6, 2)
    resumed = run_ops([*base, "--resume"], timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    assert "2 to run" in resumed.stdout
    assert Counter(json.loads(line)["id"] for line in results.read_text().splitlines()) == Counter(
        f"gsm8k/{i}@sim/base" for i in range(6))
