"""humaneval completions that pass, fail, hang, flood their output, exit early or try to reach this machine's
files and network: each fails its own sample only, in the sandbox, and pass@1 is exact (OpenCompass's
human-eval semantics re-checked here from the sim's persona rules)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from orchestra_ops.services.simllm import opencompass_more_rules as bm
from orchestra_ops.services.simllm import opencompass_synthetic as syn

from tests.helpers import free_port
from tests.integration import test_opencompass_more_suites as suites
from tests.integration.test_opencompass_more_suites import BASE, FT, MODELS, covering, eval_, pct, scores_of, summary

fleet = suites.fleet  # the same module-scoped sim fleet fixture (one for this module)

def test_humaneval_pass_at_1_in_the_sandbox(tmp_path: Path, fleet: Path) -> None:
    names = covering([f"shift_{i}" for i in range(300)], "humaneval", set(range(10)), 14)
    marker = tmp_path / "escaped"
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", free_port()))
        listener.listen(8)
        listener.settimeout(0.1)
        port = listener.getsockname()[1]
        trouble = [syn.humaneval_problem("hang_forever"), syn.humaneval_problem("flood_output"),
                   syn.humaneval_problem("exit_early"),
                   syn.humaneval_problem("escape_file_write", f"Marker: {marker}"),
                   syn.humaneval_problem("escape_net_connect", f"Port: {port}")]
        problems = [syn.humaneval_problem(n) for n in names] + trouble
        run_dir = tmp_path / "run"
        data = syn.write_humaneval(tmp_path / "he.jsonl", problems)
        eval_(fleet, "humaneval", data, run_dir, "--exec-timeout", "2")
        with pytest.raises(TimeoutError):
            listener.accept()  # nothing inside the sandbox reached this machine's loopback
    assert not marker.exists()
    # a suite note: in eval.log (the console shows it with -v)
    assert "humaneval completions run in the sandbox: bubblewrap" in (run_dir / "eval.log").read_text()

    records = {r["id"]: r for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}
    expected = {}
    for model in MODELS:
        right = []
        for i, name in enumerate(names):
            value, style = bm.humaneval_value(model, name), bm.style("humaneval", model, name)
            passed = style in (0, 1, 2, 3, 4, 5, 6) and value == bm.humaneval_shift(name)
            right.append(passed)
            record = records[f"openai_humaneval/{i}@{model}"]
            assert record["correct"] is passed, (name, model, style, record["result"])
            if style == 7:
                assert record["result"].startswith("failed: 'return' outside function")
            if passed:
                assert record["result"] == "passed"
        for j, problem in enumerate(trouble):
            record = records[f"openai_humaneval/{len(names) + j}@{model}"]
            assert record["correct"] is False
            right.append(False)
            name = problem["entry_point"]
            if name == "hang_forever":
                assert record["result"] == "timed out"
            elif name == "flood_output":
                assert record["result"] in ("failed: output limit", "timed out")
            elif name == "exit_early":
                assert record["result"].startswith("failed: exit")
            else:
                assert record["result"].startswith("failed:"), record["result"]
        expected[model] = pct(right)
    scores = scores_of(run_dir)
    got = scores["datasets"]["openai_humaneval"]
    assert (got[BASE]["accuracy"], got[FT]["accuracy"]) == (expected[BASE], expected[FT])
    assert scores["metric"] == "humaneval_pass@1"
    table = summary(run_dir)
    assert table[1] == ["openai_humaneval", scores["version"], "humaneval_pass@1", "gen",
                        f"{expected[BASE]:.2f}", f"{expected[FT]:.2f}"]
    result = json.loads((run_dir / "results" / "sim_base" / "openai_humaneval.json").read_text())
    assert result["humaneval_pass@1"] == expected[BASE]
    assert result["details"][str(len(names))]["result"] == "timed out"
    predictions = json.loads((run_dir / "predictions" / "ft" / "openai_humaneval.json").read_text())
    assert predictions["0"]["gold"] == f"Synthetic/{names[0]}"
