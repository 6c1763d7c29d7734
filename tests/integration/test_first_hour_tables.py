"""Output that fits, as the real commands print it piped with COLUMNS=80 and 100 over a real fleet of simulated
engines: no line wider than asked, no name, number, address or score split across lines, empty columns
dropped, what is hidden named; `--wide` shows every column; one score format in `ops runs`, `ops eval-status`
and the result line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from orchestra_ops.core.headline import Headline
from tests.integration.lab_fixtures import Lab, lab_fleet


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    for harness in lab_fleet(tmp_path_factory):
        for args in (["--run-dir", "runs/gsm8k-pair", "--model", "answer", "--model", "judge"],
                     ["--run-dir", "runs/gsm8k-t07", "--model", "answer", "--model", "judge", "--temperature", "0.7"]):
            done = harness.ops("eval", "gsm8k", "--topology", str(harness.topology), "--limit", "20", "--no-analyze",
                               *args)
            assert done.returncode == 0, done.stderr
        yield harness


def lines_of(lab: Lab, width: int, *args: str) -> list[str]:
    result = lab.ops(*args, env={"COLUMNS": str(width)})
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def assert_fits(lines: list[str], width: int, tokens: list[str]) -> None:
    assert lines and max(len(line) for line in lines) <= width, "\n".join(lines)
    for token in tokens:
        assert any(token in line for line in lines), f"{token!r} is split or missing:\n" + "\n".join(lines)


def headline(lab: Lab, run: str) -> Headline:
    scores: dict[str, Any] = json.loads((lab.cwd / run / "scores.json").read_text())
    return Headline.from_json(scores["headline_scores"])


@pytest.mark.parametrize("width", [80, 100])
def test_fleet_tables_fit(lab: Lab, width: int) -> None:
    processes = ["orchestrator/0", "answer/0", "answer/1", "judge/0"]
    addresses = [f"127.0.0.1:{lab.ports['orchestrator']}", f"127.0.0.1:{lab.ports['answer'] + 1}"]
    health = lines_of(lab, width, "health")
    assert_fits(health, width, [*processes, *addresses, "sim/orchestrator", "READY"])
    header = next(line for line in health if "process" in line)
    assert "adapters" not in header and "detail" not in header  # nothing in them: dropped
    status = lines_of(lab, width, "status")
    assert_fits(status, width, [*processes, "orchestrator-0.log"])
    plan = lines_of(lab, width, "plan", str(lab.topology))
    assert_fits(plan, width, [*processes, *addresses])


def test_at_80_columns_the_hidden_columns_are_named_and_wide_shows_them(lab: Lab) -> None:
    narrow = lines_of(lab, 80, "health")
    assert narrow[-1].startswith("(hidden: kv, waiting, running, pid, prefix hit") and len(narrow[-1]) <= 80
    wide = lines_of(lab, 80, "health", "--wide")
    header = next(line for line in wide if "process" in line)
    assert all(name in header for name in ("pid", "running", "waiting", "kv", "prefix"))
    assert not any(line.startswith("(hidden") for line in wide) and max(len(line) for line in wide) > 80


@pytest.mark.parametrize("width", [80, 100])
def test_runs_and_scores_fit_in_one_format(lab: Lab, width: int) -> None:
    pair = headline(lab, "runs/gsm8k-pair")
    scores = [f"{s.model} {s.score:.1f}% ± {s.half_width:.1f}" for s in pair.scores]
    assert [s.model for s in pair.scores] == ["answer", "judge"] and pair.parts()[:2] == scores
    runs = lines_of(lab, width, "runs")
    assert_fits(runs, width, ["gsm8k-pair", "gsm8k-t07", "finished", *scores, "40/40"])
    status = lines_of(lab, width, "eval-status", "runs/gsm8k-pair")
    assert_fits(status, width, pair.parts())  # the difference too: `judge − answer −20.0 [−53.6, +13.6]`
    compare = lines_of(lab, width, "compare", "runs/gsm8k-pair", "runs/gsm8k-t07")
    assert_fits(compare, width, ["temperature: 0.0 → 0.7", "McNemar"])
    suite_options = [line for line in compare if "suite options" in line]
    assert len(suite_options) == 1 and "max_tokens" not in suite_options[0]  # only what differs


def test_the_result_line_matches_scores_json(lab: Lab) -> None:
    log = (lab.cwd / "runs" / "gsm8k-pair" / "eval.log").read_text().splitlines()
    pair = headline(lab, "runs/gsm8k-pair")
    assert log[-1].startswith(f"gsm8k: {pair.text()} · 40/40 ok · "), log[-1]
    assert " calls · " in log[-1] and " tokens · " in log[-1] and log[-1].endswith(" · runs/gsm8k-pair")
