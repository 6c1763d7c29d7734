"""`ops posttrain` over a real simulated fleet (`ops up`, runtime LoRA): exact scores, pass and block,
the time limit and the resume after it, bad input, and the same call from Python.

The expected numbers are computed here from the sim's rules (opencompass_rules) and OpenCompass's
extraction as the reference states it (test_opencompass_suites's helpers), and the interval and the
verdict from their definitions, so a gate that scores, pairs or decides differently fails.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from orchestra_ops.services.simllm import opencompass_rules as br

from tests.adapters import make_adapter
from tests.helpers import REPO, free_port_block, run_ops
from tests.integration.test_opencompass_suites import oc_gsm8k_correct, oc_gsm8k_gold, oc_gsm8k_pred, oc_mmlu_pred

BASE = "sim/base"  # skill 88 in the sim's rules
CLOSE = "lora-b"  # skill 79: a little worse than base, within the interval -> pass
POOR = "ckpt-100"  # skill 31: far worse -> block
Z = 1.959963984540054
DATA = REPO / "evals" / "opencompass" / "data"


class Harness:
    def __init__(self, tmp_path: Path) -> None:
        self.cwd = tmp_path
        self.env = {"OPS_HOME": str(tmp_path / "home")}

    def ops(self, *args: str, timeout: float = 300) -> Any:
        return run_ops(list(args), env=self.env, cwd=self.cwd, timeout=timeout)

    def topology(self, latency_ms: int = 1, replicas: int = 2, **model: Any) -> Path:
        port = free_port_block(replicas)
        path = self.cwd / "pt.yaml"
        path.write_text(yaml.safe_dump({
            "name": "pt", "backend": "local", "defaults": {"ulimit_nofile": 4096, "ready_timeout_s": 120},
            "nodes": {"cpu": {"host": "localhost", "gpus": 0}},
            "models": {"base": {"model": BASE, "engine": "sim", "node": "cpu", "replicas": replicas,
                                "gpus_per_replica": 0, "port": port, "runtime_lora": True,
                                "sim": {"latency_ms": latency_ms}, **model}}}))
        self.ports = [port + i for i in range(replicas)]
        return path

    def served(self) -> list[set[str]]:
        return [{c["id"] for c in httpx.get(f"http://127.0.0.1:{p}/v1/models", timeout=10).json()["data"]}
                for p in self.ports]


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path)
    yield h
    for state in (tmp_path / "home").glob("*/state.json"):
        h.ops("down", state.parent.name, "--timeout", "5")


# ---- what the gate must say, from first principles ---------------------------------------------------

def gsm8k_outcomes(model: str) -> list[bool]:
    rows = [json.loads(line) for line in (DATA / "gsm8k" / "test.jsonl").read_text().splitlines() if line.strip()]
    return [oc_gsm8k_correct(oc_gsm8k_pred(br.gsm8k_reply(model, r["question"])), oc_gsm8k_gold(r["answer"]))
            for r in rows]


def mmlu_outcomes(model: str) -> dict[str, list[bool]]:
    out = {}
    for source in sorted((DATA / "mmlu" / "test").glob("*_test.csv")):
        with open(source, newline="") as handle:
            rows = list(csv.reader(handle))
        out[source.name.removesuffix("_test.csv")] = [oc_mmlu_pred(br.mmlu_reply(model, r[0])) == r[5] for r in rows]
    return out


def mean_var(base: list[bool], other: list[bool]) -> tuple[float, float, int]:
    d = [100.0 * (int(b) - int(a)) for a, b in zip(base, other, strict=True)]
    mean = sum(d) / len(d)
    return mean, sum((x - mean) ** 2 for x in d) / (len(d) - 1), len(d)


def expected_rows(adapter: str, max_drop: float) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    gb, ga = gsm8k_outcomes(BASE), gsm8k_outcomes(adapter)
    mean, var, n = mean_var(gb, ga)
    half = Z * math.sqrt(var / n)
    rows["gsm8k"] = {"row": "gsm8k", "metric": "accuracy", "base": 100 * sum(gb) / n, "adapter": 100 * sum(ga) / n,
                     "delta": mean, "ci95": [mean - half, mean + half], "n": n}
    mb, ma = mmlu_outcomes(BASE), mmlu_outcomes(adapter)
    parts = [mean_var(mb[s], ma[s]) for s in mb]
    k = len(parts)
    diff = sum(p[0] for p in parts) / k
    half = Z * math.sqrt(sum(v / m for _, v, m in parts)) / k
    rows["mmlu"] = {"row": "mmlu", "metric": "naive_average",
                    "base": sum(100 * sum(v) / len(v) for v in mb.values()) / k,
                    "adapter": sum(100 * sum(v) / len(v) for v in ma.values()) / k,
                    "delta": diff, "ci95": [diff - half, diff + half], "n": sum(p[2] for p in parts)}
    for row in rows.values():
        row["verdict"] = "block" if row["ci95"][1] < -max_drop else "pass"
    return rows


def assert_rows(got: dict[str, Any], want: dict[str, dict[str, Any]]) -> None:
    assert list(got) == list(want)
    for name, row in want.items():
        g = got[name]
        assert (g["row"], g["metric"], g["n"], g["verdict"]) == (row["row"], row["metric"], row["n"], row["verdict"])
        assert g["base"] == pytest.approx(row["base"], abs=1e-4)
        assert g["adapter"] == pytest.approx(row["adapter"], abs=1e-4)
        assert g["delta"] == pytest.approx(row["delta"], abs=1e-4)
        assert g["ci95"] == pytest.approx(row["ci95"], abs=1e-4)


# ---- the tests ----------------------------------------------------------------------------------------

def test_pass_then_block_with_up_and_down(harness: Harness, tmp_path: Path) -> None:
    topology = harness.topology()
    close_dir = make_adapter(tmp_path / "adapters" / CLOSE)
    poor_dir = make_adapter(tmp_path / "adapters" / POOR)

    want = expected_rows(CLOSE, 1.0)
    assert [r["verdict"] for r in want.values()] == ["pass", "pass"]  # the data shows what the test claims
    first = harness.ops("posttrain", "--topology", str(topology), "--up", "--model", "base",
                        "--adapter", f"{CLOSE}=adapters/{CLOSE}", "--datasets", "gsm8k,mmlu", "--json")
    assert first.returncode == 0, first.stderr
    result = json.loads(first.stdout)
    assert result["verdict"] == "pass" and result["base"] == "base"
    assert result["adapter"] == {"name": CLOSE, "path": str(close_dir)}
    assert_rows(result["datasets"], want)
    run_dir = tmp_path / "runs" / f"posttrain-{CLOSE}-pt"
    assert json.loads((run_dir / "posttrain.json").read_text()) == result
    assert harness.served() == [{BASE}, {BASE}]  # unloaded from every replica; the fleet stays up (no --down)

    # OpenCompass's summary: every dataset's rows for both models in one CSV
    with open(run_dir / "summary" / "summary.csv", newline="") as handle:
        table = list(csv.reader(handle))
    assert table[0] == ["dataset", "version", "metric", "mode", "base", CLOSE]
    assert [r[0] for r in table[1:]] == ["gsm8k"] + [f"lukaemon_mmlu_{s}" for s in mmlu_outcomes(BASE)]
    assert table[1][4:] == [f"{want['gsm8k']['base']:.2f}", f"{want['gsm8k']['adapter']:.2f}"]
    assert (run_dir / "predictions" / CLOSE / "gsm8k.json").is_file()
    assert (run_dir / "predictions" / "base" / "lukaemon_mmlu_marketing.json").is_file()

    want = expected_rows(POOR, 1.0)
    assert want["gsm8k"]["verdict"] == "block"
    second = harness.ops("posttrain", "--topology", "pt", "--down", "--model", "base",
                         "--adapter", f"{POOR}={poor_dir}", "--datasets", "gsm8k,mmlu")
    assert second.returncode == 1, second.stderr
    assert "verdict: BLOCK" in second.stdout
    poor = json.loads((tmp_path / "runs" / f"posttrain-{POOR}-pt" / "posttrain.json").read_text())
    assert poor["verdict"] == "block"
    assert_rows(poor["datasets"], want)
    state = json.loads((tmp_path / "home" / "pt" / "state.json").read_text())
    assert state["status"] == "down"


def test_timeout_exits_124_and_the_same_call_resumes(harness: Harness, tmp_path: Path) -> None:
    topology = harness.topology(latency_ms=400, replicas=1)
    make_adapter(tmp_path / "adapters" / CLOSE)
    args = ["posttrain", "--topology", str(topology), "--model", "base", "--adapter", f"{CLOSE}=adapters/{CLOSE}",
            "--datasets", "gsm8k", "--concurrency", "4"]
    up = harness.ops("up", str(topology))
    assert up.returncode == 0, up.stderr
    cut = harness.ops(*args, "--timeout", "3")
    assert cut.returncode == 124, cut.stderr
    assert "error: --timeout 3 s: the time limit was reached after" in cut.stderr
    assert "rerun the same command to resume" in cut.stderr
    run_dir = tmp_path / "runs" / f"posttrain-{CLOSE}-pt"
    before = [json.loads(line)["id"] for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert 0 < len(before) < 80
    assert harness.served() == [{BASE}]  # unloaded on the way out

    done = harness.ops(*args, "--timeout", "600", "--json")
    assert done.returncode == 0, done.stderr
    ids = [json.loads(line)["id"] for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert ids[: len(before)] == before and len(ids) == len(set(ids)) == 80  # nothing ran twice
    assert_rows(json.loads(done.stdout)["datasets"], {"gsm8k": expected_rows(CLOSE, 1.0)["gsm8k"]})


def test_bad_input_is_exit_2_before_anything_runs(harness: Harness, tmp_path: Path) -> None:
    topology = harness.topology()
    make_adapter(tmp_path / "ft")
    bad = harness.ops("posttrain", "--topology", str(topology), "--model", "base", "--adapter", "ft=ft",
                      "--datasets", "gsm8k,nope")
    assert bad.returncode == 2
    assert "error: --datasets: unknown dataset 'nope'; OpenCompass-scored suites: gsm8k, mmlu" in bad.stderr
    missing = harness.ops("posttrain", "--topology", str(topology), "--model", "base", "--adapter", "ft=absent")
    assert missing.returncode == 2 and "error: --adapter ft=absent: no such directory" in missing.stderr
    shape = harness.ops("posttrain", "--topology", str(topology), "--model", "base", "--adapter", "ft")
    assert shape.returncode == 2 and "expected NAME=DIR" in shape.stderr
    assert "Traceback" not in bad.stderr + missing.stderr + shape.stderr
    assert not (tmp_path / "home" / "pt" / "state.json").exists()  # nothing was started


def test_units_that_fail_are_exit_4_with_the_rest_kept(harness: Harness, tmp_path: Path) -> None:
    topology = harness.topology(max_model_len=64)  # gsm8k's 4-shot prompt does not fit: every call fails
    make_adapter(tmp_path / "ft")
    proc = harness.ops("posttrain", "--topology", str(topology), "--up", "--down", "--model", "base",
                       "--adapter", "ft=ft", "--datasets", "gsm8k", "--sample", "3")
    assert proc.returncode == 4, proc.stderr
    assert "error: gsm8k: no score (units failed or are missing" in proc.stderr
    run_dir = tmp_path / "runs" / "posttrain-ft-pt"
    result = json.loads((run_dir / "posttrain.json").read_text())
    assert (result["verdict"], result["incomplete"]) == ("incomplete", ["gsm8k"])
    assert result["datasets"]["gsm8k"]["base"] is None and result["datasets"]["gsm8k"]["verdict"] is None
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert [(r["status"], r["error_type"]) for r in records] == [("error", "prompt_too_long")] * 6
    assert json.loads((tmp_path / "home" / "pt" / "state.json").read_text())["status"] == "down"


def test_the_python_call_returns_the_dict_and_raises_ours(harness: Harness, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestra_ops.api import posttrain
    from orchestra_ops.errors import ConfigError, OpsError

    monkeypatch.setenv("OPS_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    topology = harness.topology()
    make_adapter(tmp_path / "adapters" / POOR)
    with pytest.raises(ConfigError, match="unknown option 'max_dorp'"):
        posttrain(topology=str(topology), model="base", adapter=f"{POOR}=adapters/{POOR}", max_dorp=2.0)
    with pytest.raises(ConfigError, match="--max-drop -1: must be 0 or more points"):
        posttrain(topology=str(topology), model="base", adapter=f"{POOR}=adapters/{POOR}", max_drop=-1.0)
    try:
        result = posttrain(topology=str(topology), model="base", adapter=f"{POOR}=adapters/{POOR}",
                           datasets=["gsm8k"], up=True, down=True, max_drop=1.0)
    except OpsError as exc:  # pragma: no cover - shown on failure
        pytest.fail(f"posttrain raised {exc!r}")
    assert result["verdict"] == "block"
    assert_rows(result["datasets"], {"gsm8k": expected_rows(POOR, 1.0)["gsm8k"]})
    assert json.loads((tmp_path / "runs" / f"posttrain-{POOR}-pt" / "posttrain.json").read_text()) == result
    assert json.loads((tmp_path / "home" / "pt" / "state.json").read_text())["status"] == "down"
