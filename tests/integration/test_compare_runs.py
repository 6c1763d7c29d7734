"""`ops compare` on two real `ops eval` runs over the same dataset: equivalent, and a known difference."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from orchestra_ops.analysis.significance import binomial_two_sided
from tests.helpers import run_ops
from tests.integration.eval_fixtures import dataset, model_config, results
from tests.simserver import SimServer


def test_two_real_runs_are_equivalent_and_differ_by_their_failures(tmp_path: Path,
                                                                   sim_server: Callable[..., SimServer]) -> None:
    good = sim_server("m", args=["--latency-ms", "5"])
    flaky = sim_server("m", args=["--latency-ms", "30", "--fail", "500:0.3", "--seed", "8"])
    data = dataset(tmp_path / "d.jsonl", [f"s{i}" for i in range(80)])
    runs = {}
    for name, sim in (("a", good), ("b", flaky)):
        config = model_config(tmp_path / f"{name}.json", {"m": [sim]})
        runs[name] = tmp_path / f"run-{name}"
        out = run_ops(["eval", "chat", "--model-config", str(config), "--dataset", str(data), "--run-dir",
                       str(runs[name]), "--max-retries", "1", "--concurrency", "8", "--no-analyze"])
        assert out.returncode == 0, out.stderr
    failed = sum(1 for r in results(runs["b"]) if r["status"] != "ok")
    assert all(r["status"] == "ok" for r in results(runs["a"])) and 0 < failed < 80

    out = run_ops(["compare", str(runs["a"]), str(runs["b"]), "--json", "--require-equivalent"])
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["equivalent"] and report["differences"] == []
    assert [d["item"] for d in report["intended_differences"]] == ["routing", "endpoints"]  # another replica
    score = report["score"]
    assert (score["metric"], score["shared_ids"], score["a"]) == ("success", 80, 1.0)
    assert score["b"] == (80 - failed) / 80
    interval = score["interval"]
    assert interval["difference"] == -failed / 80
    assert interval["low"] <= -failed / 80 <= interval["high"] < 0
    assert score["mcnemar"]["a_right_b_wrong"] == failed and score["mcnemar"]["a_wrong_b_right"] == 0
    assert score["mcnemar"]["p_value"] == binomial_two_sided(0, failed)
    latency = {(r["group"], r["name"]): r for r in report["latency"]}
    assert latency[("role", "m")]["count_a"] == 80 and latency[("role", "m")]["count_b"] == 80 - failed
    assert latency[("role", "m")]["p50_delta"] > 0  # the flaky sim is the slower one (30 ms vs 5 ms)

    shown = run_ops(["compare", str(runs["a"]), str(runs["b"])])
    assert shown.returncode == 0 and "equivalent" in shown.stdout and "McNemar" in shown.stdout
