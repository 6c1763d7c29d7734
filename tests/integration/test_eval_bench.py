"""`ops bench`: a capacity test through the same client and pool, one row per --sweep level."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.helpers import run_ops
from tests.integration.eval_fixtures import model_config, total
from tests.simserver import SimServer


def test_bench_sweep_reports_every_level(tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    sims = [sim_server("m", args=["--latency-ms", "20", "--fail", "503:0.05", "--seed", "2"]) for _ in range(2)]
    config = model_config(tmp_path / "mc.json", {"m": sims})
    proc = run_ops(["bench", "m", "--model-config", str(config), "--sweep", "2,8", "--requests", "40",
                    "--max-retries", "1", "--json"])
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    levels = report["results"]
    assert [row["concurrency"] for row in levels] == [2, 8]
    for row in levels:
        assert row["requests"] == 40 and row["ok"] + sum(row["errors"].values()) == 40
        assert row["req_per_s"] > 0 and row["p50_s"] <= row["p90_s"] <= row["p99_s"]
    assert set().union(*(row["errors"] for row in levels)) <= {"http_503"}
    assert total(sims, "sim_requests_total") == 80
    assert total(sims, "sim_max_requests_in_flight") <= 8
    assert "knee" in report

    table = run_ops(["bench", "m", "--model-config", str(config), "--concurrency", "4", "--requests", "8"])
    assert table.returncode == 0, table.stderr
    assert "req/s" in table.stdout and "p99 ms" in table.stdout
