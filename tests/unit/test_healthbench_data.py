"""HealthBench data: the bundled synthetic set, dataset and --responses checks that name the line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from orchestra_ops.evals.healthbench.dataset import check_responses, load_examples, load_responses
from orchestra_ops.evals.healthbench.suite import HealthBenchSuite

from orchestra_ops.errors import ConfigError
from tests.helpers import REPO, run_ops
from tests.integration.healthbench_fixtures import BUNDLED

ROW = {"prompt": [{"role": "user", "content": "Q?"}], "prompt_id": "p1", "example_tags": ["theme:hedging"],
       "rubrics": [{"criterion": "Says A.", "points": 5, "tags": ["axis:accuracy"]},
                   {"criterion": "Says B.", "points": -2, "tags": ["axis:accuracy"]}]}


def write(path: Path, *rows: object) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_the_bundled_set_is_healthbench_shaped() -> None:
    suite = HealthBenchSuite()
    assert Path(suite.default_dataset or "") == BUNDLED
    rows = suite.load(BUNDLED, dedupe=False)
    assert len(rows) == 64 and len({r["id"] for r in rows}) == 64
    assert sum(len(r["rubrics"]) for r in rows[:50]) == 539  # --limit 50: the seeds' workload
    assert any(len(r["prompt"]) >= 5 for r in rows) and any(len(r["prompt"]) == 1 for r in rows)
    for row in rows:
        assert row["id"] == row["prompt_id"]
        assert sum(t.startswith("theme:") for t in row["example_tags"]) == 1
        for item in row["rubrics"]:
            assert isinstance(item["points"], int)
            assert sum(t.startswith("level:") for t in item["tags"]) == 1
            assert sum(t.startswith("axis:") for t in item["tags"]) == 1
    themes = Counter(t for r in rows for t in r["example_tags"] if t.startswith("theme:"))
    assert len(themes) == 7
    assert any(i["points"] < 0 for r in rows for i in r["rubrics"])
    assert any(t.startswith("cluster:") for r in rows for i in r["rubrics"] for t in i["tags"])
    only_negative = [r["id"] for r in rows if any(
        all(i["points"] < 0 for i in r["rubrics"] if f"axis:{a}" in i["tags"])
        and any(f"axis:{a}" in i["tags"] for i in r["rubrics"])
        for a in ("accuracy", "completeness", "communication_quality", "context_awareness", "instruction_following"))]
    assert only_negative
    assert not re.search(r"sim-[0-9a-f]{8}", BUNDLED.read_text())  # the graded token comes from the response


def test_the_generator_rewrites_the_bundled_file_byte_for_byte(tmp_path: Path) -> None:
    out = tmp_path / "hb.jsonl"
    proc = subprocess.run([sys.executable, "scripts/gen_healthbench_synthetic.py", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == BUNDLED.read_bytes()


@pytest.mark.parametrize(("row", "message"), [
    ("{not json", ":1: not valid JSON"),
    ([1], ":1: each line is a JSON object"),
    ({**ROW, "prompt_id": 3}, ':1: "prompt_id" must be a non-empty string'),
    ({**ROW, "prompt": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]},
     ":1 (prompt_id p1): the prompt must end on a user turn (it ends on 'assistant')"),
    ({**ROW, "prompt": [{"role": "user", "content": ["parts"]}]}, ":1 (prompt_id p1): prompt[0] must be"),
    ({**ROW, "rubrics": [{"criterion": "A", "points": True, "tags": []}]},
     ':1 (prompt_id p1): rubrics[0]: "points" must be a number'),
    ({**ROW, "rubrics": [{"criterion": "A", "points": 2, "tags": ["axis:x", "axis:x"]}]},
     ":1 (prompt_id p1): rubrics[0]: tag 'axis:x' is given twice"),
    ({**ROW, "rubrics": [{"criterion": "A", "points": -2, "tags": []}]},
     ":1 (prompt_id p1): no rubric item has positive points"),
    ({**ROW, "example_tags": ["theme:a", "theme:a"]}, ":1 (prompt_id p1): example tag 'theme:a' is given twice"),
    ({**ROW, "rubrics": []}, ':1 (prompt_id p1): "rubrics" must be a non-empty list'),
])
def test_a_bad_row_is_named(tmp_path: Path, row: object, message: str) -> None:
    path = write(tmp_path / "d.jsonl", row)
    with pytest.raises(ConfigError) as err:
        load_examples(path, dedupe=False)
    assert str(err.value).startswith(f"{path}") and message in str(err.value)


def test_duplicate_prompt_ids(tmp_path: Path) -> None:
    path = write(tmp_path / "d.jsonl", ROW, {**ROW, "prompt_id": "p2"}, {**ROW, "example_tags": []})
    with pytest.raises(ConfigError) as err:
        load_examples(path, dedupe=False)
    assert "1 prompt_id(s) appear more than once: 'p1' (lines 1, 3)" in str(err.value)
    kept = load_examples(path, dedupe=True)
    assert [(r["id"], r["example_tags"]) for r in kept] == [("p1", ["theme:hedging"]), ("p2", ["theme:hedging"])]


def test_the_responses_file(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", {"prompt_id": "p1", "response": "A"}, "", {"prompt_id": "p2", "response": ""})
    assert load_responses(path) == {"p1": "A", "p2": ""}
    for rows, message in [
        (({"prompt_id": "p1", "response": "A"}, {"prompt_id": "p1", "response": "B"}),
         ":2: a second response for prompt_id 'p1' (the first is on line 1)"),
        (({"prompt_id": "p1", "response": None},), ":1: \"response\" of 'p1' must be a string"),
        (({"response": "x"},), ':1: "prompt_id" must be a non-empty string'),
        (("",), ": --responses file has no responses"),
    ]:
        with pytest.raises(ConfigError) as err:
            load_responses(write(tmp_path / "bad.jsonl", *rows))
        assert message in str(err.value)
    with pytest.raises(ConfigError) as err:
        load_responses(tmp_path / "nope.jsonl")
    assert "no such --responses file" in str(err.value)
    with pytest.raises(ConfigError) as err:
        check_responses({"p1": "A"}, [{"id": f"p{i}"} for i in range(1, 14)], "r.jsonl")
    assert str(err.value).startswith("r.jsonl: no response for 12 of the 13 examples to grade: 'p2', 'p3'")
    assert "'p11' and 2 more" in str(err.value)


def test_ops_eval_healthbench_help_lists_its_options() -> None:
    proc = run_ops(["eval", "healthbench", "--help"])
    assert proc.returncode == 0, proc.stderr
    for flag in ("--responses", "--judge", "--judge-concurrency", "--judge-attempts", "--judge-temperature",
                 "--judge-max-tokens", "--judge-system", "--candidate-temperature", "--candidate-max-tokens"):
        assert flag in proc.stdout
    assert "Templates (--template NAME=PATH): grader." in proc.stdout
