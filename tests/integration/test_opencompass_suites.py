"""gsm8k and mmlu over real simulated engines, base model and adapter side by side: exact accuracies.

The expectation is computed here from the sim's rules (opencompass_rules: what each persona replies)
and OpenCompass's extraction rules as the reference states them (written again below, not imported
from the suite), so a suite that extracts or scores differently fails.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from orchestra_ops.evals.opencompass import paired
from orchestra_ops.services.simllm import opencompass_rules as br

from tests.adapters import make_adapter
from tests.helpers import run_ops
from tests.simserver import SimServer

BASE, FT, BROKEN = "sim/base", "ft", "broken"


# ---- OpenCompass's rules, from the reference (opencompass-lora.md 1.2, 1.3) ------------------------

def oc_gsm8k_pred(text: str) -> str:
    numbers = re.findall(r"\-?\d+\.\d+|\-?\d+", text.split("Question:")[0])
    return numbers[-1] if numbers else "NULL"


def oc_gsm8k_gold(answer: str) -> str:
    return answer.split("#### ")[1].replace(",", "")


def oc_gsm8k_correct(pred: str, gold: str) -> bool:
    try:
        return pred == gold or abs(float(pred) - int(gold)) < 1e-6
    except Exception:
        return False


def oc_mmlu_pred(text: str) -> str:
    match = re.search(r"(?i)ANSWER\s*:\s*([A-D])", text)
    return match.group(1) if match else ""


# ---- fixtures ---------------------------------------------------------------------------------------

@pytest.fixture
def fleet(tmp_path: Path, sim_server: Callable[..., SimServer]) -> Path:
    """One replica serving the base model and the adapter `ft`, and one that fails every request."""
    adapter = make_adapter(tmp_path / "ft")
    sim = sim_server(BASE, args=["--latency-ms", "2", "--enable-lora", "--lora-modules", f"{FT}={adapter}"])
    broken = sim_server(BROKEN, args=["--latency-ms", "1", "--fail", "500:1"])
    config = tmp_path / "mc.json"
    config.write_text(json.dumps({BASE: [{"ip_addr": "127.0.0.1", "port": sim.port}],
                                  FT: [{"ip_addr": "127.0.0.1", "port": sim.port}],
                                  BROKEN: [{"ip_addr": "127.0.0.1", "port": broken.port}]}))
    return config


def eval_(config: Path, suite: str, dataset: Path, run_dir: Path, *models: str, extra: tuple[str, ...] = ()) -> Any:
    args = ["eval", suite, "--no-analyze",
            "--model-config", str(config), "--dataset", str(dataset), "--run-dir", str(run_dir),
            "--max-retries", "1", *extra]
    for model in models:
        args += ["--model", model]
    proc = run_ops(args, timeout=180)
    assert proc.returncode == 0, proc.stderr
    return proc


def pick(candidates: list[str], dataset: str, wanted: set[tuple[str, int]], size: int) -> list[str]:
    """Questions covering every (model, style) in `wanted`, topped up to `size`."""
    chosen: list[str] = []
    for q in candidates:
        hits = {(m, br.style(dataset, m, q)) for m in (BASE, FT)} & wanted
        if dataset == "gsm8k":
            hits = {(m, s) for m, s in hits if s != 6 or br.gsm8k_value(m, q) >= 1000}
        if hits:
            chosen.append(q)
            wanted -= hits
    assert not wanted, f"no candidate question shows {wanted}"
    chosen += [q for q in candidates if q not in chosen][: max(0, size - len(chosen))]
    return chosen


def read_summary(path: Path) -> list[list[str]]:
    with open(path, newline="") as handle:
        return list(csv.reader(handle))


def as_opencompass_summary(path: Path) -> dict[str, dict[str, dict[str, str]]]:
    """RD-Agent's reading of an OpenCompass summary: {model column: {dataset: {metric: value}}}."""
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    models = [c for c in rows[0] if c not in ("dataset", "version", "metric", "mode")]
    return {m: {r["dataset"]: {r["metric"]: r[m]} for r in rows} for m in models}


# ---- gsm8k ------------------------------------------------------------------------------------------

def test_gsm8k_exact_accuracy_for_base_and_adapter(tmp_path: Path, fleet: Path) -> None:
    candidates = [f"Test problem {i}: how many parcels remain in the depot?" for i in range(400)]
    questions = pick(candidates, "gsm8k", {(m, s) for m in (BASE, FT) for s in (0, 6, 7, 8, 9)}, 30)
    lines = []
    for i, q in enumerate(questions):
        gold = br.gsm8k_truth(q)
        shown = f"{gold:,}" if i % 2 else str(gold)
        lines.append(json.dumps({"question": q, "answer": f"Worked solution.\n#### {shown}"}))
    data = tmp_path / "gsm8k"
    data.mkdir()
    (data / "test.jsonl").write_text("\n".join(lines) + "\n")
    run_dir = tmp_path / "run"
    proc = eval_(fleet, "gsm8k", data, run_dir, BASE, FT, BROKEN)

    expected: dict[str, float] = {}
    outcomes: dict[str, list[bool]] = {}
    for model in (BASE, FT):
        golds = [oc_gsm8k_gold(json.loads(line)["answer"]) for line in lines]
        right = [oc_gsm8k_correct(oc_gsm8k_pred(br.gsm8k_reply(model, q)), gold)
                 for q, gold in zip(questions, golds, strict=True)]
        outcomes[model] = right
        expected[model] = 100 * sum(right) / len(right)
    assert expected[BASE] != expected[FT]
    scores = json.loads((run_dir / "scores.json").read_text())
    got = scores["datasets"]["gsm8k"]
    assert (got[BASE]["accuracy"], got[FT]["accuracy"]) == (expected[BASE], expected[FT])
    assert got[BROKEN] == {"accuracy": None, "correct": 0, "n": 30, "failed": 30, "missing": 0}
    diffs = [100.0 * (b - a) for a, b in zip(outcomes[BASE], outcomes[FT], strict=True)]
    mean = sum(diffs) / 30
    half = 1.959963984540054 * math.sqrt(sum((d - mean) ** 2 for d in diffs) / 29 / 30)
    comparison = scores["comparisons"][FT]["gsm8k"]
    assert comparison["difference"] == pytest.approx(mean, abs=1e-4) and comparison["n"] == 30
    assert comparison["ci95"] == pytest.approx([mean - half, mean + half], abs=1e-4)
    log = (run_dir / "eval.log").read_text()  # OpenCompass's table, two decimals: eval.log (the console with -v)
    assert f"{expected[BASE]:.2f}" in log and f"{mean:+.2f}" in log
    result = proc.stdout.splitlines()[-1]  # the result line: one decimal, each model ± its interval, the difference
    half_base = 196 * math.sqrt(expected[BASE] / 100 * (1 - expected[BASE] / 100) / 30)
    assert result.startswith(f"gsm8k: accuracy: {BASE} {expected[BASE]:.1f}% ± {half_base:.1f} (n=30), "), result
    # the headline's difference is the one a gate acts on: the paired bootstrap over its samples (posttrain's)
    boot = paired.weighted_bootstrap({"gsm8k": list(zip(outcomes[BASE], outcomes[FT], strict=True))}, "micro")
    assert boot is not None and boot.low is not None and boot.high is not None
    assert f"; {FT} − {BASE} {mean:+.1f} [{boot.low:+.1f}, {boot.high:+.1f}]".replace("-", "−") in result
    assert BROKEN not in result.split(" · ")[0]  # a model whose units failed has no score

    # the quirks, one by one, as stored per unit
    records = {r["id"]: r for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}
    for model in (BASE, FT):
        for i, q in enumerate(questions):
            record = records[f"gsm8k/{i}@{model}"]
            style, value = br.style("gsm8k", model, q), br.gsm8k_value(model, q)
            if style == 6 and value >= 1000:
                assert record["extracted"] == f"{value:,}".split(",")[-1] and record["correct"] is False
            if style == 7:
                assert "Question:" in record["prediction"] and record["extracted"] == str(value)
            if style == 9:
                assert record["extracted"] == "NULL" and record["correct"] is False

    # OpenCompass's files
    summary = read_summary(run_dir / "summary" / "summary.csv")
    version = scores["version"]
    assert re.fullmatch(r"[0-9a-f]{6}", version)
    assert summary == [["dataset", "version", "metric", "mode", BASE, FT, BROKEN],
                       ["gsm8k", version, "accuracy", "gen", f"{expected[BASE]:.2f}", f"{expected[FT]:.2f}", "-"]]
    parsed = as_opencompass_summary(run_dir / "summary" / "summary.csv")
    assert parsed[BASE] == {"gsm8k": {"accuracy": f"{expected[BASE]:.2f}"}}
    predictions = json.loads((run_dir / "predictions" / "ft" / "gsm8k.json").read_text())
    assert list(predictions) == [str(i) for i in range(30)]
    first = predictions["0"]
    assert [m["role"] for m in first["origin_prompt"]] == ["HUMAN", "BOT"] * 4 + ["HUMAN"]
    assert first["origin_prompt"][-1]["prompt"].startswith(f"Question: {questions[0]}\n")
    assert first["origin_prompt"][-1]["prompt"].endswith("Answer:")
    assert (first["prediction"], first["gold"]) == (br.gsm8k_reply(FT, questions[0]), json.loads(lines[0])["answer"])
    results = json.loads((run_dir / "results" / "ft" / "gsm8k.json").read_text())
    assert results["accuracy"] == expected[FT] and results["type"] == "GEN"
    assert set(results["details"]["0"]) == {"prompt", "origin_prediction", "predictions", "references", "correct"}
    assert not (run_dir / "predictions" / BROKEN).exists()


# ---- mmlu -------------------------------------------------------------------------------------------

SUBJECTS = {"abstract_algebra": "stem", "anatomy": "stem", "philosophy": "humanities", "sociology": "social",
            "marketing": "other"}


def write_mmlu(root: Path, per_subject: dict[str, list[str]]) -> None:
    for split in ("test", "dev"):
        (root / split).mkdir(parents=True)
    for subject, questions in per_subject.items():
        with open(root / "test" / f"{subject}_test.csv", "w", newline="") as handle:
            for q in questions:
                csv.writer(handle).writerow([q, "one, with a comma", "two", "three", "four", br.mmlu_truth(q)])
        with open(root / "dev" / f"{subject}_dev.csv", "w", newline="") as handle:
            for i in range(5):
                csv.writer(handle).writerow([f"Dev {subject} {i}?", "a", "b", "c", "d", "ABCD"[i % 4]])


def test_mmlu_exact_per_subject_group_and_micro_accuracy(tmp_path: Path, fleet: Path) -> None:
    per_subject: dict[str, list[str]] = {}
    for n, subject in enumerate(SUBJECTS):
        candidates = [f"{subject} question {i}: which option fits?" for i in range(300)]
        wanted = {(m, s) for m in (BASE, FT) for s in (0, 7, 8, 9)} if n < 2 else set()
        per_subject[subject] = pick(candidates, "mmlu", wanted, 6 + n)
    write_mmlu(tmp_path / "mmlu", per_subject)
    run_dir = tmp_path / "run"
    eval_(fleet, "mmlu", tmp_path / "mmlu", run_dir, BASE, FT, BROKEN, extra=("--summary-groups",))
    scores = json.loads((run_dir / "scores.json").read_text())

    accuracy: dict[str, dict[str, float]] = {}
    correct: dict[str, dict[str, list[bool]]] = {}
    for model in (BASE, FT):
        for subject, questions in per_subject.items():
            right = [oc_mmlu_pred(br.mmlu_reply(model, q)) == br.mmlu_truth(q) for q in questions]
            correct.setdefault(model, {})[subject] = right
            accuracy.setdefault(model, {})[subject] = 100 * sum(right) / len(right)
            assert scores["datasets"][f"lukaemon_mmlu_{subject}"][model]["accuracy"] == accuracy[model][subject]
    for model in (BASE, FT):
        acc = accuracy[model]
        groups = scores["groups"]
        assert groups["mmlu-stem"]["scores"][model] == pytest.approx((acc["abstract_algebra"] + acc["anatomy"]) / 2)
        assert groups["mmlu-humanities"]["scores"][model] == pytest.approx(acc["philosophy"])
        assert groups["mmlu"]["scores"][model] == pytest.approx(sum(acc.values()) / 5)
        pooled = [r for rights in correct[model].values() for r in rights]
        assert groups["mmlu-weighted"]["scores"][model] == pytest.approx(100 * sum(pooled) / len(pooled))
        assert groups["mmlu"]["scores"][BROKEN] is None
    assert (groups["mmlu-stem"]["datasets"], groups["mmlu-stem"]["of"]) == (2, 19)

    # the quirks: a lowercase `answer: b` is wrong, the first ANSWER: wins, no letter is wrong
    records = {r["id"]: r for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}
    seen = set()
    for model in (BASE, FT):
        for subject, questions in per_subject.items():
            for i, q in enumerate(questions):
                record, style = records[f"{subject}/{i}@{model}"], br.style("mmlu", model, q)
                letter = br.mmlu_letter(model, q)
                if style == 7:
                    assert record["extracted"] == letter.lower() and record["correct"] is False
                if style == 8:
                    assert record["extracted"] == "ABCD"[("ABCD".index(letter) + 2) % 4]
                if style == 9:
                    assert record["extracted"] == "" and record["correct"] is False
                seen.add((model, style))
    assert {(m, s) for m in (BASE, FT) for s in (7, 8, 9)} <= seen

    # summary.csv as OpenCompass writes it: subject rows only (a group row needs all of its subjects)
    summary = read_summary(run_dir / "summary" / "summary.csv")
    version = scores["version"]
    assert summary[0] == ["dataset", "version", "metric", "mode", BASE, FT, BROKEN]
    assert summary[1:] == [[f"lukaemon_mmlu_{s}", version, "accuracy", "gen", f"{accuracy[BASE][s]:.2f}",
                            f"{accuracy[FT][s]:.2f}", "-"] for s in sorted(per_subject)]
    assert all(re.fullmatch(r"\d+\.\d\d|-", cell) for row in summary[1:] for cell in row[4:])
    markdown = (run_dir / "summary" / "summary.md").read_text().splitlines()
    assert markdown[0] == f"| dataset | version | metric | mode | {BASE} | {FT} | {BROKEN} |"
    predictions = json.loads((run_dir / "predictions" / "sim_base" / "lukaemon_mmlu_marketing.json").read_text())
    prompt = predictions["0"]["origin_prompt"]
    assert len(prompt) == 1 and prompt[0]["role"] == "HUMAN"
    assert prompt[0]["prompt"].endswith(f"{per_subject['marketing'][0]}\n\nA) one, with a comma\nB) two\nC) three\n"
                                        "D) four")


def test_mmlu_five_shot_variant(tmp_path: Path, fleet: Path) -> None:
    per_subject = {"marketing": [f"Five-shot question {i}?" for i in range(12)]}
    write_mmlu(tmp_path / "mmlu", per_subject)
    run_dir = tmp_path / "run"
    eval_(fleet, "mmlu", tmp_path / "mmlu", run_dir, BASE, extra=("--variant", "5shot"))
    scores = json.loads((run_dir / "scores.json").read_text())

    def first_option(text: str) -> str:  # the forms the sim writes in 5-shot replies
        match = (re.search(r"[Tt]he answer is:?\s+\(?([ABCD])\)?", text)
                 or re.search(r"(?:^|\n)\s*([ABCD])(?:[.):\s]|$)", text.strip()))
        return match.group(1) if match else ""

    right = [first_option(br.mmlu_reply(BASE, q, br.FIVE_SHOT)) == br.mmlu_truth(q) for q in per_subject["marketing"]]
    assert scores["datasets"]["lukaemon_mmlu_marketing"][BASE]["accuracy"] == 100 * sum(right) / 12
    assert scores["variant"] == "5shot"
    prompt = json.loads((run_dir / "predictions" / "sim_base" / "lukaemon_mmlu_marketing.json").read_text())["0"]
    assert [m["role"] for m in prompt["origin_prompt"]] == ["HUMAN", "BOT"] * 5 + ["HUMAN"]
    assert prompt["origin_prompt"][1]["prompt"] == "A\n" and prompt["origin_prompt"][-1]["prompt"].endswith("Answer: ")


def test_bad_datasets_are_clear_errors(tmp_path: Path) -> None:
    config = tmp_path / "mc.json"
    config.write_text(json.dumps({"m": [{"ip_addr": "127.0.0.1", "port": 9}]}))
    (tmp_path / "g.jsonl").write_text('{"question": "q", "answer": "#### 3"}\n{"question": "q2", "answer": "3"}\n')
    proc = run_ops(["eval", "gsm8k", "--no-analyze", "--model-config", str(config), "--model", "m", "--dataset",
                    str(tmp_path / "g.jsonl"), "--run-dir", str(tmp_path / "r1")])
    assert proc.returncode == 2
    assert proc.stderr == f"error: {tmp_path / 'g.jsonl'}:2: the answer has no '#### ' before the final number\n"
    (tmp_path / "mm" / "test").mkdir(parents=True)
    (tmp_path / "mm" / "test" / "anatomy_test.csv").write_text("q,a,b,c,d,E\n")
    proc = run_ops(["eval", "mmlu", "--no-analyze",
                    "--model-config", str(config), "--model", "m", "--dataset", str(tmp_path / "mm"),
                    "--run-dir", str(tmp_path / "r2")])
    assert proc.returncode == 2
    assert proc.stderr == (f"error: {tmp_path / 'mm' / 'test' / 'anatomy_test.csv'}: row 1: answer 'E' is not one "
                           "of A, B, C, D\n")
    proc = run_ops(["eval", "mmlu", "--no-analyze", "--model-config", str(config), "--model", "m", "--model", "m"])
    assert proc.returncode == 2 and proc.stderr == "error: --model m is given twice\n"
