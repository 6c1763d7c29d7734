"""`ops posttrain` over a real simulated fleet (`ops up`, runtime LoRA): exact scores, pass and block,
the time limit and the resume after it, bad input, and the same call from Python.

The expected numbers are computed here from the sim's rules (benchmark_rules) and OpenCompass's
extraction as the reference states it (test_opencompass_suites's helpers), and the interval and the
verdict from their definitions, so a gate that scores, pairs or decides differently fails.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from orchestra_ops.evals.opencompass.paired import weighted_bootstrap
from orchestra_ops.evals.opencompass.sampling import seeded_sample
from orchestra_ops.services.simllm import opencompass_rules as br

from tests.adapters import make_adapter
from tests.helpers import REPO, free_port_block, run_ops
from tests.integration.test_opencompass_suites import oc_gsm8k_correct, oc_gsm8k_gold, oc_gsm8k_pred, oc_mmlu_pred

BASE = "sim/base"  # skill 88 in the sim's rules
CLOSE = "lora-b"  # skill 79: a little worse than base, within the interval -> pass
POOR = "ckpt-100"  # skill 31: far worse -> block
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


@pytest.fixture(name="harness")
def harness_fixture(tmp_path: Path) -> Iterator[Harness]:
    """A Harness in tmp_path; every fleet it brought up is taken down at teardown (also for tests that import it)."""
    h = Harness(tmp_path)
    yield h
    for state in (tmp_path / "home").glob("*/state.json"):
        h.ops("down", state.parent.name, "--timeout", "5")


# ---- what the gate must say, from first principles ---------------------------------------------------

def gsm8k_outcomes(model: str, sample: int | None = None, seed: int = 0) -> list[bool]:
    rows = [json.loads(line) for line in (DATA / "gsm8k" / "test.jsonl").read_text().splitlines() if line.strip()]
    rows = seeded_sample(rows, sample, seed, "gsm8k")  # --sample N --seed S, as the reference's sampling defines
    return [oc_gsm8k_correct(oc_gsm8k_pred(br.gsm8k_reply(model, r["question"])), oc_gsm8k_gold(r["answer"]))
            for r in rows]


def mmlu_outcomes(model: str, sample: int | None = None, seed: int = 0) -> dict[str, list[bool]]:
    out = {}
    for source in sorted((DATA / "mmlu" / "test").glob("*_test.csv")):
        with open(source, newline="") as handle:
            rows = list(csv.reader(handle))
        subject = source.name.removesuffix("_test.csv")
        rows = seeded_sample(rows, sample, seed, subject)
        out[subject] = [oc_mmlu_pred(br.mmlu_reply(model, r[0])) == r[5] for r in rows]
    return out


def expected_verdict(ci95: list[float] | None, max_drop: float) -> str:
    """The rule, from its definition: pass wholly above -max_drop, block wholly below, else inconclusive."""
    if ci95 is None:
        return "inconclusive"
    return "pass" if ci95[0] > -max_drop else "block" if ci95[1] < -max_drop else "inconclusive"


def expected_rows(adapter: str, max_drop: float, sample: int | None = None, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Every headline row from the sim's rules: the scores and the difference worked out here; the interval
    is paired.weighted_bootstrap (tested on exact cases in tests/unit/test_paired.py) over these outcomes,
    paired and weighted as the headline must be (gsm8k: pooled; mmlu: the naive average over subjects)."""
    rows: dict[str, dict[str, Any]] = {}
    gb, ga = gsm8k_outcomes(BASE, sample, seed), gsm8k_outcomes(adapter, sample, seed)
    n = len(gb)
    interval = weighted_bootstrap({"gsm8k": list(zip(gb, ga, strict=True))}, "micro")
    assert interval is not None
    rows["gsm8k"] = {"row": "gsm8k", "metric": "accuracy", "base": 100 * sum(gb) / n, "adapter": 100 * sum(ga) / n,
                     "delta": 100 * (sum(ga) - sum(gb)) / n, "n": n,
                     "ci95": None if interval.low is None else [interval.low, interval.high]}
    mb, ma = mmlu_outcomes(BASE, sample, seed), mmlu_outcomes(adapter, sample, seed)
    k = len(mb)
    interval = weighted_bootstrap({f"lukaemon_mmlu_{s}": list(zip(mb[s], ma[s], strict=True)) for s in mb}, "naive")
    assert interval is not None
    rows["mmlu"] = {"row": "mmlu", "metric": "naive_average",
                    "base": sum(100 * sum(v) / len(v) for v in mb.values()) / k,
                    "adapter": sum(100 * sum(v) / len(v) for v in ma.values()) / k,
                    "delta": sum(100 * (sum(ma[s]) - sum(mb[s])) / len(mb[s]) for s in mb) / k,
                    "n": sum(len(v) for v in mb.values()),
                    "ci95": None if interval.low is None else [interval.low, interval.high]}
    for row in rows.values():
        row["verdict"] = expected_verdict(row["ci95"], max_drop)
    return rows


def assert_rows(got: dict[str, Any], want: dict[str, dict[str, Any]]) -> None:
    assert list(got) == list(want)
    for name, row in want.items():
        g = got[name]
        assert (g["row"], g["metric"], g["n"], g["verdict"]) == (row["row"], row["metric"], row["n"], row["verdict"])
        assert g["base"] == pytest.approx(row["base"], abs=1e-4)
        assert g["adapter"] == pytest.approx(row["adapter"], abs=1e-4)
        assert g["delta"] == pytest.approx(row["delta"], abs=1e-4)
        assert g["ci95"] == (None if row["ci95"] is None else pytest.approx(row["ci95"], abs=1e-4))
        assert g["interval"]["name"] == "paired percentile bootstrap over all samples"
        assert (g["interval"]["resamples"], g["interval"]["seed"]) == (10_000, 0)
        assert (g["samples_to_decide"] is None) == (row["verdict"] != "inconclusive")


# ---- the tests ----------------------------------------------------------------------------------------

def test_pass_then_block_with_up_and_down(harness: Harness, tmp_path: Path) -> None:
    topology = harness.topology()
    close_dir = make_adapter(tmp_path / "adapters" / CLOSE)
    poor_dir = make_adapter(tmp_path / "adapters" / POOR)

    want = expected_rows(CLOSE, 20.0)
    assert [r["verdict"] for r in want.values()] == ["pass", "pass"]  # the data shows what the test claims
    first = harness.ops("posttrain", "--topology", str(topology), "--up", "--model", "base",
                        "--adapter", f"{CLOSE}=adapters/{CLOSE}", "--datasets", "gsm8k,mmlu", "--max-drop", "20",
                        "--json")
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
    want = expected_rows(CLOSE, 1.0)["gsm8k"]
    assert want["verdict"] == "inconclusive"  # 40 pairs: the interval holds -1
    assert done.returncode == 6, done.stderr
    ids = [json.loads(line)["id"] for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert ids[: len(before)] == before and len(ids) == len(set(ids)) == 80  # nothing ran twice
    result = json.loads(done.stdout)
    assert result["verdict"] == "inconclusive"
    assert_rows(result["datasets"], {"gsm8k": want})
    need = result["datasets"]["gsm8k"]["samples_to_decide"]["samples"]
    low, high = want["ci95"]
    assert need == int(40 * ((want["delta"] - low) / (want["delta"] + 1.0)) ** 2) + 1  # leaning to pass
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: inconclusive: gsm8k: adapter - base {want['delta']:+.2f} points, 95% interval [{low:+.2f}, "
        f"{high:+.2f}] holds -1 (40 paired); about {need} paired samples would decide it")


def test_few_samples_are_inconclusive_not_a_pass_and_one_pair_per_subject_still_has_an_interval(
        harness: Harness, tmp_path: Path) -> None:
    topology = harness.topology()
    assert harness.ops("up", str(topology)).returncode == 0
    make_adapter(tmp_path / "ckpt-400")
    # --sample 8: mmlu's adapter is 15.6 points worse, gsm8k's 25: neither interval excludes -1
    want = expected_rows("ckpt-400", 1.0, sample=8, seed=0)
    assert [(r["verdict"], r["delta"]) for r in want.values()] == [("inconclusive", -25.0),
                                                                   ("inconclusive", -15.625)]
    few = harness.ops("posttrain", "--topology", "pt", "--model", "base", "--adapter", "ckpt-400=ckpt-400",
                      "--sample", "8", "--run-dir", "eight", "--json")
    assert few.returncode == 6, few.stderr
    result = json.loads(few.stdout)
    assert result["verdict"] == "inconclusive"
    assert_rows(result["datasets"], want)
    assert json.loads((tmp_path / "eight" / "posttrain.json").read_text()) == result
    assert "error: inconclusive: gsm8k: adapter - base -25.00 points" in few.stderr
    assert "; mmlu: adapter - base -15.62 points" in few.stderr

    # --sample 1: one pair per mmlu subject (4 in all) still gives the naive average an interval; gsm8k's one
    # pair gives none
    want = expected_rows("ckpt-400", 0.0, sample=1, seed=6)
    assert (want["mmlu"]["n"], want["gsm8k"]["n"], want["gsm8k"]["ci95"]) == (4, 1, None)
    assert want["mmlu"]["ci95"] is not None
    one = harness.ops("posttrain", "--topology", "pt", "--model", "base", "--adapter", "ckpt-400=ckpt-400",
                      "--sample", "1", "--seed", "6", "--max-drop", "0", "--run-dir", "one", "--json")
    result = json.loads(one.stdout)
    assert_rows(result["datasets"], want)
    overall = "block" if want["mmlu"]["verdict"] == "block" else "inconclusive"
    assert (result["verdict"], one.returncode) == (overall, {"block": 1, "inconclusive": 6}[overall]), one.stderr
    assert result["datasets"]["gsm8k"]["samples_to_decide"]["samples"] is None


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
