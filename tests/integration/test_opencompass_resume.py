"""kill -9 in the middle of a two-model gsm8k run, then --resume: every sample x model exactly once."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from orchestra_ops.services.simllm import opencompass_rules as br

from tests.adapters import make_adapter
from tests.helpers import run_ops
from tests.integration.eval_fixtures import kill9_mid_run
from tests.simserver import SimServer


def oc_correct(text: str, answer: str) -> bool:
    numbers = re.findall(r"\-?\d+\.\d+|\-?\d+", text.split("Question:")[0])
    pred, gold = (numbers[-1] if numbers else "NULL"), answer.split("#### ")[1].replace(",", "")
    try:
        return pred == gold or abs(float(pred) - int(gold)) < 1e-6
    except ValueError:
        return False


def test_kill_9_then_resume_runs_every_pair_once(tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("sim/base", args=["--latency-ms", "30", "--enable-lora", "--lora-modules",
                                       f"ft={make_adapter(tmp_path / 'ft')}"])
    config = tmp_path / "mc.json"
    config.write_text(json.dumps({name: [{"ip_addr": "127.0.0.1", "port": sim.port}] for name in ("sim/base", "ft")}))
    questions = [f"Resume problem {i}: how many crates are left?" for i in range(200)]
    answers = [f"Steps.\n#### {br.gsm8k_truth(q):,}" for q in questions]
    data = tmp_path / "test.jsonl"
    rows = [json.dumps({"question": q, "answer": a}) for q, a in zip(questions, answers, strict=True)]
    data.write_text("\n".join(rows) + "\n")
    run_dir = tmp_path / "run"
    base = ["eval", "gsm8k", "--no-analyze", "--model-config", str(config), "--model", "sim/base", "--model", "ft",
            "--run-dir", str(run_dir), "--concurrency", "4"]
    results = run_dir / "results.jsonl"
    kill9_mid_run([*base, "--dataset", str(data)], results, 100)
    before = [json.loads(line) for line in results.read_text().splitlines()]
    assert 100 <= len(before) < 400
    assert not (run_dir / "scores.json").exists()
    status = json.loads(run_ops(["eval-status", str(run_dir), "--json"]).stdout)
    assert (status["dataset_size"], status["missing"], status["ok"]) == (400, 400 - len(before), len(before))

    resumed = run_ops([*base, "--resume"], timeout=180)  # the run dir remembers the dataset and the models
    assert resumed.returncode == 0, resumed.stderr
    after = [json.loads(line) for line in results.read_text().splitlines()]
    units = [f"gsm8k/{i}@{m}" for i in range(200) for m in ("sim/base", "ft")]
    assert Counter(r["id"] for r in after) == Counter(units)
    assert after[: len(before)] == before
    assert f"{400 - len(before)} to run" in resumed.stdout

    scores = json.loads((run_dir / "scores.json").read_text())
    for model in ("sim/base", "ft"):
        right = [oc_correct(br.gsm8k_reply(model, q), a) for q, a in zip(questions, answers, strict=True)]
        assert scores["datasets"]["gsm8k"][model]["accuracy"] == 100 * sum(right) / 200
    assert scores["counts"]["ok"] == 400 and scores["counts"]["missing"] == 0
    predictions = json.loads((run_dir / "predictions" / "ft" / "gsm8k.json").read_text())
    assert list(predictions) == [str(i) for i in range(200)]
