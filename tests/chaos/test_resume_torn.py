"""Resume reads what it counts: a line it cannot parse (even one cut mid-record that ends in `}`)
is not done; the run says how many lines it skipped and runs those ids again."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestra_ops.runner.prepare import select_tasks
from orchestra_ops.runner.results import ResultsStore
from tests.chaos.chaos_fixtures import answers, chat_eval, module_sim
from tests.helpers import run_ops
from tests.integration.eval_fixtures import dataset, model_config, results
from tests.simserver import SimServer

IDS = list(range(30))


@pytest.fixture(scope="module")
def sim(tmp_path_factory: Any) -> Iterator[SimServer]:
    yield from module_sim(tmp_path_factory, ["--latency-ms", "5"])


def _cut_inside(line: str) -> str:
    """The line cut just after its first inner `}`: still ends in `}`, no longer JSON."""
    cut = line[: line.index("}") + 1]
    assert cut.endswith("}") and cut != line
    with pytest.raises(ValueError):
        json.loads(cut)
    return cut


def test_cut_lines_are_not_done_and_run_again(tmp_path: Path, sim: SimServer) -> None:
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    data = dataset(tmp_path / "d.jsonl", IDS)
    run_dir = tmp_path / "run"
    base = chat_eval(config, run_dir, "--concurrency", "4")
    first = run_ops([*base, "--dataset", str(data)])
    assert first.returncode == 0, first.stderr
    clean = answers(run_dir)
    assert sorted(clean) == IDS

    lines = (run_dir / "results.jsonl").read_text().splitlines()
    victims = [json.loads(lines[i])["id"] for i in (3, 11)]
    lines[3] = _cut_inside(lines[3])  # a record cut mid-write that still ends in `}`
    lines[11] = json.dumps({"status": "ok", "answer": "no id"})  # an object without an id
    lines.insert(20, "[1, 2]")  # JSON, but not a record
    (run_dir / "results.jsonl").write_text("\n".join(lines) + "\n")

    store = ResultsStore(run_dir)
    assert store.bad_lines == 3 and set(victims).isdisjoint(store.finished_ids)
    assert [s["id"] for s in select_tasks([{"id": i} for i in IDS], store, resume=True, retry_failed=False)] \
        == sorted(victims)

    resumed = run_ops([*base, "--resume"])
    assert resumed.returncode == 0, resumed.stderr
    note = (f"note: {run_dir / 'results.jsonl'}: 3 unreadable line(s) skipped (a torn or cut record); their ids "
            "count as not done and run again")
    assert note in resumed.stdout and note in (run_dir / "eval.log").read_text()
    assert "30 samples, 2 to run (resume; 28 ok and 0 failed before)" in resumed.stdout
    readable = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()
                if _parses(line)]
    assert Counter(r["id"] for r in readable if isinstance(r, dict) and "id" in r) == Counter(IDS)
    assert json.loads((run_dir / "scores.json").read_text())["ok"] == 30
    assert {r["id"]: r["answer"] for r in readable if isinstance(r, dict) and "id" in r} == clean


def test_a_torn_tail_is_counted_and_cut(tmp_path: Path, sim: SimServer) -> None:
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    data = dataset(tmp_path / "d.jsonl", IDS[:10])
    run_dir = tmp_path / "run"
    base = chat_eval(config, run_dir)
    assert run_ops([*base, "--dataset", str(data)]).returncode == 0
    text = (run_dir / "results.jsonl").read_text()
    last = text.splitlines()[-1]
    (run_dir / "results.jsonl").write_text(text[: len(text) - len(last) - 1] + _cut_inside(last))  # no newline
    resumed = run_ops([*base, "--resume"])
    assert resumed.returncode == 0, resumed.stderr
    assert "1 unreadable line(s) skipped" in resumed.stdout and "1 to run" in resumed.stdout
    assert Counter(r["id"] for r in results(run_dir)) == Counter(IDS[:10])  # the tail was cut: every line parses


def _parses(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True
