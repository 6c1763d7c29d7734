"""humaneval, bbh, hellaswag, ARC and cmmlu over one shared sim fleet (base model and adapter): exact scores.

Each expectation is computed here from the sim's persona rules (opencompass_more_rules) and OpenCompass's
postprocessor semantics written again below (opencompass/datasets/bbh.py, text_postprocessors.py,
humaneval.py at a5acc4bb; only the forms the sim writes), not imported from the suites, so a suite that
extracts or scores differently fails. humaneval programs really run in the sandbox: ones that pass, fail,
hang, flood their output, exit early and try to reach the machine's files and network
(tests/chaos/test_humaneval_programs.py, over this module's fleet fixture).
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from orchestra_ops.services.simllm import opencompass_more_rules as bm
from orchestra_ops.services.simllm import opencompass_synthetic as syn

from tests.adapters import make_adapter
from tests.helpers import run_ops
from tests.simserver import SimServer

BASE, FT = "sim/base", "ft"
MODELS = (BASE, FT)


# ---- OpenCompass's semantics for the forms the sim writes ------------------------------------------

def oc_bbh_mcq(text: str) -> str:
    parts = text.split("answer is ")
    ans = parts[1].strip() if len(parts) != 1 else text
    match = re.search(r"\(([A-Z])\)*", ans) or re.search(r"([A-Z])", ans)
    return match.group(1) if match else ans


def oc_bbh_freeform(text: str) -> str:
    parts = re.split(r"answer is\s*:?\s*", text, flags=re.IGNORECASE)
    ans = parts[-1].strip() if len(parts) != 1 else text
    ans = ans.split("\n")[0].strip()
    if ans.endswith("."):
        ans = ans[:-1].strip()
    bold = re.search(r"\*\*(.*?)\*\*", ans)
    if bold:
        ans = bold.group(1).strip()
    word = re.match(r"^(yes|no|true|false)\b", ans, flags=re.IGNORECASE)
    return word.group(1).capitalize() if word else re.sub(r"\s+", " ", ans).strip()


def oc_first_option(text: str) -> str:  # the patterns that decide for the sim's forms
    text = text.strip()
    for pattern in (r"[Tt]he answer is:?\s+\(?([ABCD])\)?", r"^([ABCD])[\s.]?", r"([ABCD])"):
        match = re.search(pattern, text)
        if match:
            return match.group(1)
    return ""


def oc_cmmlu(text: str) -> str:
    match = re.search(r"(?i)答案\s*:\s*[\W]*([A-D])[\W]*", text)
    return match.group(1) if match else ""


# ---- the fleet ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One sim replica serving the base model and the adapter `ft` (one for the whole module)."""
    root = tmp_path_factory.mktemp("fleet")
    adapter = make_adapter(root / "ft")
    sim = SimServer(BASE, args=["--latency-ms", "1", "--enable-lora", "--lora-modules", f"{FT}={adapter}"],
                    log_dir=root).start()
    config = root / "mc.json"
    config.write_text(json.dumps({m: [{"ip_addr": "127.0.0.1", "port": sim.port}] for m in MODELS}))
    try:
        yield config
    finally:
        sim.stop()


def eval_(config: Path, suite: str, dataset: Path | None, run_dir: Path, *extra: str, code: int = 0) -> Any:
    args = ["eval", suite, "--no-analyze", "--model-config", str(config), "--run-dir", str(run_dir),
            "--max-retries", "1", "--model", BASE, "--model", FT, *extra]
    if dataset is not None:
        args += ["--dataset", str(dataset)]
    proc = run_ops(args, timeout=300)
    assert proc.returncode == code, proc.stdout + proc.stderr
    return proc


def scores_of(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "scores.json").read_text())


def summary(run_dir: Path) -> list[list[str]]:
    with open(run_dir / "summary" / "summary.csv", newline="") as handle:
        return list(csv.reader(handle))


def pct(right: list[bool]) -> float:
    return 100 * sum(right) / len(right)


def covering(candidates: list[str], dataset: str, styles: set[int], size: int) -> list[str]:
    wanted = {(m, s) for m in MODELS for s in styles}
    chosen = []
    for q in candidates:
        hits = {(m, bm.style(dataset, m, q)) for m in MODELS} & wanted
        if hits:
            chosen.append(q)
            wanted -= hits
    assert not wanted, f"no candidate shows {wanted}"
    return chosen + [q for q in candidates if q not in chosen][: max(0, size - len(chosen))]


# ---- bbh ----------------------------------------------------------------------------------------------

def test_bbh_every_subset_both_postprocessors_and_the_average(tmp_path: Path, fleet: Path) -> None:
    from orchestra_ops.evals.opencompass import bbh  # the subset lists only (OpenCompass's config order)

    examples = {s: [syn.bbh_example(s, i, s in bbh.MULTIPLE_CHOICE) for i in range(4)] for s in bbh.SUBSETS}
    run_dir = tmp_path / "run"
    eval_(fleet, "bbh", syn.write_bbh(tmp_path / "bbh", examples), run_dir, "--summary-groups")
    scores = scores_of(run_dir)
    expected: dict[str, dict[str, float]] = {m: {} for m in MODELS}
    styles = set()
    for model in MODELS:
        for subset, rows in examples.items():
            right = []
            for row in rows:
                reply = bm.bbh_reply(model, row["input"])
                if subset in bbh.MULTIPLE_CHOICE:
                    right.append(oc_bbh_mcq(reply) == oc_bbh_mcq(row["target"]))
                else:
                    right.append(oc_bbh_freeform(reply).casefold() == oc_bbh_freeform(row["target"]).casefold())
                styles.add((subset in bbh.MULTIPLE_CHOICE, bm.style("bbh", model, row["input"])))
            expected[model][subset] = pct(right)
            assert scores["datasets"][f"bbh-{subset}"][model]["accuracy"] == expected[model][subset], subset
    assert len(styles) >= 16  # most styles of both kinds occur
    average = {m: sum(expected[m].values()) / 27 for m in MODELS}
    assert scores["groups"]["bbh"]["scores"] == pytest.approx(average)
    assert average[BASE] != average[FT]
    table = summary(run_dir)
    assert table[0] == ["dataset", "version", "metric", "mode", BASE, FT]
    assert [r[0] for r in table[1:]] == [f"bbh-{s}" for s in bbh.SUBSETS] + ["bbh"]
    assert all(r[2:4] == ["score", "gen"] for r in table[1:28])
    assert table[28][1:] == ["-", "naive_average", "gen", f"{average[BASE]:.2f}", f"{average[FT]:.2f}"]
    assert len({r[1] for r in table[1:28]}) == 27  # each subset's prompt has its own version
    result = json.loads((run_dir / "results" / "ft" / "bbh-navigate.json").read_text())
    assert result["score"] == expected[FT]["navigate"] and "accuracy" not in result


# ---- hellaswag, ARC, cmmlu ----------------------------------------------------------------------------

def test_hellaswag_ten_shot(tmp_path: Path, fleet: Path) -> None:
    questions = covering([f"scene {i}: a made-up task begins" for i in range(300)], "hellaswag", {0, 7, 9}, 12)
    shots = [f"shot {i}" for i in range(10)]
    run_dir = tmp_path / "run"
    eval_(fleet, "hellaswag", syn.write_hellaswag(tmp_path / "hs", questions, shots), run_dir)
    scores = scores_of(run_dir)
    for model in MODELS:
        # the query's activity label goes (the text after its first ': '): the sim sees the scene as written
        right = [oc_first_option(bm.choice_reply("hellaswag", model, q)) == bm.choice_truth("hellaswag", q)
                 for q in questions]
        assert scores["datasets"]["hellaswag"][model]["accuracy"] == pct(right)
    prompt = json.loads((run_dir / "predictions" / "ft" / "hellaswag.json").read_text())["0"]["origin_prompt"]
    assert [m["role"] for m in prompt] == ["HUMAN"] + ["HUMAN", "BOT"] * 10 + ["HUMAN"]
    assert prompt[2]["prompt"] == "A\n" and prompt[-1]["prompt"].startswith(f"{questions[0]}\nA) ending 1")
    assert summary(run_dir)[1][:4] == ["hellaswag", scores["version"], "accuracy", "gen"]


def test_arc_challenge_and_easy(tmp_path: Path, fleet: Path) -> None:
    qc = covering([f"Challenge question {i}?" for i in range(300)], "arc", {0, 7, 9}, 8)
    qe = [f"Easy question {i}?" for i in range(6)]
    challenge = [syn.arc_line("ARC-c", q) for q in qc] + [syn.arc_line("ARC-c", "Three choices?", "ABC")]
    easy = [syn.arc_line("ARC-e", q, "1234") for q in qe]
    run_dir = tmp_path / "run"
    eval_(fleet, "arc", syn.write_arc(tmp_path / "ARC", challenge, easy), run_dir)
    scores = scores_of(run_dir)
    for model in MODELS:
        for name, questions in (("ARC-c", qc), ("ARC-e", qe)):
            right = [oc_first_option(bm.choice_reply("arc", model, q)) == bm.choice_truth("arc", q)
                     for q in questions]
            cell = scores["datasets"][name][model]
            assert (cell["accuracy"], cell["n"]) == (pct(right), len(questions))  # the 3-choice row is skipped
    assert [r[0] for r in summary(run_dir)[1:]] == ["ARC-c", "ARC-e"]


def test_cmmlu_subjects_and_groups(tmp_path: Path, fleet: Path) -> None:
    from orchestra_ops.evals.opencompass import cmmlu_data

    candidates = [f"合成题目{i}：哪个选项符合规则？" for i in range(300)]
    first = covering(candidates, "cmmlu", set(range(6, 10)), 6)
    subjects = {"agronomy": first, "anatomy": candidates[100:104], "arts": candidates[110:113]}
    run_dir = tmp_path / "run"
    eval_(fleet, "cmmlu", syn.write_cmmlu(tmp_path / "cmmlu", subjects), run_dir, "--summary-groups")
    scores = scores_of(run_dir)
    accuracy: dict[str, dict[str, float]] = {m: {} for m in MODELS}
    for model in MODELS:
        for subject, questions in subjects.items():
            right = [oc_cmmlu(bm.choice_reply("cmmlu", model, q)) == bm.choice_truth("cmmlu", q) for q in questions]
            accuracy[model][subject] = pct(right)
            assert scores["datasets"][f"cmmlu-{subject}"][model]["accuracy"] == accuracy[model][subject]
        groups = scores["groups"]
        assert groups["cmmlu-stem"]["scores"][model] == pytest.approx(accuracy[model]["anatomy"])
        assert groups["cmmlu-other"]["scores"][model] == pytest.approx(accuracy[model]["agronomy"])
        assert groups["cmmlu"]["scores"][model] == pytest.approx(sum(accuracy[model].values()) / 3)
    assert (groups["cmmlu"]["datasets"], groups["cmmlu"]["of"]) == (3, len(cmmlu_data.NAMES))
    table = summary(run_dir)
    assert [r[0] for r in table[1:]] == ["cmmlu-agronomy", "cmmlu-anatomy", "cmmlu-arts"]  # no group is whole
    prompt = json.loads((run_dir / "predictions" / "sim_base" / "cmmlu-arts.json").read_text())["0"]
    assert "艺术学" in prompt["origin_prompt"][0]["prompt"]


def test_bundled_sets_run_and_bad_files_are_clear_errors(tmp_path: Path, fleet: Path) -> None:
    for suite, n in (("arc", 20), ("hellaswag", 12), ("bbh", 81), ("cmmlu", 134), ("humaneval", 12)):
        scores = scores_of(eval_(fleet, suite, None, tmp_path / suite) and tmp_path / suite)
        assert sum(cell[BASE]["n"] for cell in scores["datasets"].values()) == n
    bad = tmp_path / "he.jsonl"
    bad.write_text('{"task_id": "x", "prompt": "p", "entry_point": "f"}\n')
    proc = eval_(fleet, "humaneval", bad, tmp_path / "r1", code=2)
    assert proc.stderr == (f"error: {bad}:1: no \"test\" (its fields: task_id, prompt, entry_point); a humaneval line "
                           "is {\"task_id\", \"prompt\", \"entry_point\", \"test\"} (strings)\n")
    proc = eval_(fleet, "bbh", tmp_path / "nowhere", tmp_path / "r2", code=2)
    assert proc.stderr == f"error: {tmp_path / 'nowhere'}: a BBH dataset is a directory of <subset>.json files\n"


def test_resume_runs_only_the_pairs_without_a_result(tmp_path: Path, fleet: Path) -> None:
    """A humaneval run of the base model, then --resume with the adapter added: only the adapter's units
    run (each program once more in the sandbox), every (sample, model) has one record, scores are exact."""
    names = [f"shift_{i}" for i in range(6)]
    data = syn.write_humaneval(tmp_path / "he.jsonl", [syn.humaneval_problem(n) for n in names])
    run_dir = tmp_path / "run"
    common = ["eval", "humaneval", "--no-analyze", "--model-config", str(fleet), "--run-dir", str(run_dir),
              "--model", BASE]
    first = run_ops([*common, "--dataset", str(data)], timeout=300)
    assert first.returncode == 0, first.stderr
    before = (run_dir / "results.jsonl").read_text().splitlines()
    resumed = run_ops([*common, "--model", FT, "--resume"], timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    after = (run_dir / "results.jsonl").read_text().splitlines()
    assert after[: len(before)] == before
    ids = [json.loads(line)["id"] for line in after]
    assert sorted(ids) == sorted(f"openai_humaneval/{i}@{m}" for i in range(6) for m in MODELS)
    assert "6 to run" in resumed.stdout
    scores = scores_of(run_dir)
    for model in MODELS:
        right = [bm.style("humaneval", model, n) <= 6 and bm.humaneval_value(model, n) == bm.humaneval_shift(n)
                 for n in names]
        assert scores["datasets"]["openai_humaneval"][model]["accuracy"] == pct(right)
