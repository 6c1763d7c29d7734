"""`--cache`: a second run of the same work makes no model call and scores the same; hits are marked
in profile.jsonl, counted in scores.json and the report, recorded in run.json, and `ops compare`
says so. Sampled requests are cached only with --cache-sampled."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from orchestra_ops.client.identity import directory_fingerprint
from tests.adapters import make_adapter
from tests.helpers import model_calls, run_ops
from tests.simserver import SimServer

BASE, FT = "sim/base", "ft"
UNITS = 2 * (40 + 40)  # bundled gsm8k (40) and mmlu (4 subjects x 10), base and adapter


@pytest.fixture
def sim(tmp_path: Path, sim_server: Callable[..., SimServer]) -> tuple[SimServer, Path]:
    adapter = make_adapter(tmp_path / "ft")
    server = sim_server(BASE, args=["--latency-ms", "2", "--enable-lora", "--lora-modules", f"{FT}={adapter}"])
    config = tmp_path / "mc.json"
    config.write_text(json.dumps({BASE: [{"ip_addr": "127.0.0.1", "port": server.port}],
                                  FT: [{"ip_addr": "127.0.0.1", "port": server.port}]}))
    return server, config


def eval_(config: Path, run_dir: Path, *extra: str) -> Any:
    proc = run_ops(["eval", "opencompass", "--model-config", str(config), "--run-dir", str(run_dir),
                    "--model", BASE, "--model", FT, "--datasets", "gsm8k,mmlu", *extra], timeout=240)
    assert proc.returncode == 0, proc.stderr
    return proc


def profile(run_dir: Path) -> list[dict[str, Any]]:
    return model_calls(run_dir)


def requests(server: SimServer) -> float:
    return server.metrics()["sim_requests_total"]


def test_second_run_makes_no_model_call_and_scores_the_same(tmp_path: Path, sim: tuple[SimServer, Path]) -> None:
    server, config = sim
    cache = tmp_path / "cache" / "responses.sqlite"
    first, second = tmp_path / "first", tmp_path / "second"
    eval_(config, first, "--cache-file", str(cache), "--no-analyze")
    calls_before = requests(server)
    assert calls_before == UNITS
    eval_(config, second, "--cache-file", str(cache))
    assert requests(server) == calls_before  # not one request reached the engine

    events = profile(second)
    assert len(events) == UNITS and all(e["cache"] == "hit" and e["replica"] == "cache" for e in events)
    assert not any("cache" in e for e in profile(first))
    a, b = (json.loads((d / "scores.json").read_text()) for d in (first, second))
    assert a["headline"] == b["headline"] and a["suites"]["gsm8k"]["datasets"] == b["suites"]["gsm8k"]["datasets"]
    assert a["cache"] == {"hits": 0, "calls": UNITS, "model_calls": UNITS}
    assert b["cache"] == {"hits": UNITS, "calls": UNITS, "model_calls": 0}
    assert f"response cache: {UNITS} of {UNITS} call(s) answered from the cache, 0 by a model" in \
        (second / "eval.log").read_text()
    assert (first / "summary" / "summary.csv").read_text() == (second / "summary" / "summary.csv").read_text()

    info = json.loads((second / "run.json").read_text())
    adapter = {"path": str((tmp_path / "ft").resolve()), "fingerprint": directory_fingerprint(tmp_path / "ft")}
    assert info["cache"] == {"path": str(cache.resolve()), "sampled": False, "identities": {
        BASE: {"served": BASE, "revision": None, "declared": None, "roots": [{"path": BASE, "fingerprint": None}]},
        FT: {"served": FT, "revision": None, "declared": None, "roots": [adapter]}}}  # an endpoints file: roots
    assert info["cache_used"] is True
    stats = json.loads((second / "analysis" / "stats.json").read_text())
    assert (stats["calls"]["model_calls"], stats["calls"]["cache_hits"]) == (0, UNITS)
    assert f"answered from the response cache</td><td>{UNITS}</td>" in (second / "analysis" / "report.html").read_text()

    compared = run_ops(["compare", str(first), str(second), "--json"], timeout=120)
    assert compared.returncode == 0, compared.stderr
    result = json.loads(compared.stdout)
    assert result["equivalent"] is True
    assert result["cache"] == [f"run A used a response cache ({cache.resolve()}): 0 of {UNITS} call(s) were "
                               "answered from it, not by a model; its latencies cover the other calls only",
                               f"run B used a response cache ({cache.resolve()}): {UNITS} of {UNITS} call(s) were "
                               "answered from it, not by a model; its latencies cover the other calls only"]
    shown = run_ops(["compare", str(first), str(second)], timeout=120)
    assert "run B used a response cache" in shown.stdout


def test_sampled_requests_are_cached_only_with_cache_sampled(tmp_path: Path, sim: tuple[SimServer, Path]) -> None:
    server, config = sim
    cache = tmp_path / "c.sqlite"
    sampled = ("--temperature", "0.7", "--datasets", "gsm8k", "--no-analyze")
    run_ops_args = ["eval", "opencompass", "--model-config", str(config), "--model", BASE, *sampled]
    for name in ("s1", "s2"):
        proc = run_ops([*run_ops_args, "--run-dir", str(tmp_path / name), "--cache-file", str(cache)], timeout=240)
        assert proc.returncode == 0, proc.stderr
    assert requests(server) == 80  # 40 each time: a sampled reply is not replayed without --cache-sampled
    assert not any("cache" in e for e in profile(tmp_path / "s2"))
    for name in ("s3", "s4"):
        proc = run_ops([*run_ops_args, "--run-dir", str(tmp_path / name), "--cache-file", str(cache),
                        "--cache-sampled"], timeout=240)
        assert proc.returncode == 0, proc.stderr
    assert requests(server) == 120  # s3 asked the engine and stored; s4 replayed
    assert all(e.get("cache") == "hit" for e in profile(tmp_path / "s4"))
    alone = run_ops([*run_ops_args, "--run-dir", str(tmp_path / "s5"), "--cache-sampled"], timeout=60)
    assert alone.returncode == 2 and "error: --cache-sampled needs --cache (or --cache-file PATH)" in alone.stderr
