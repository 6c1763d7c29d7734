"""Tables that fit (cli/render.py): the exact layout fit_table picks, and what a table printed at 80 and 100
columns looks like: no line wider than the terminal, no token split across lines, empty columns dropped,
paths shortened, the hidden columns named, COLUMNS honoured when piped, --wide unlimited."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from orchestra_ops.cli import render
from orchestra_ops.cli.render import fit_table, make_table, shorten_path

COLUMNS = ["process", "host:port", "state", "latency", "pid", "model", "running", "waiting", "kv", "adapters",
           "detail"]
ROWS = [(f"orchestrator/{i}", f"127.0.0.1:{18100 + i}", "READY", f"{700 + i} ms", 3243 + i, "sim/orchestrator-8b",
         "0", "0", "0%", "-", "") for i in range(2)]
ROWS += [("retrieval", "127.0.0.1:18765", "READY", "102 ms", 3248, "-", "-", "-", "-", "-", "")]
OPTIONAL = ("kv", "waiting", "running", "pid", "latency")


def shown(columns: list[str], rows: list[tuple[object, ...]], width: int, **kw: object) -> str:
    table = make_table("title", columns, rows, **kw)  # type: ignore[arg-type]
    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None).print(table)
    return buffer.getvalue()


def test_empty_columns_are_dropped_and_optional_ones_hidden_in_order() -> None:
    fitted = fit_table(COLUMNS, ROWS, 80, OPTIONAL)
    assert fitted.columns == ["process", "host:port", "state", "latency", "model"]
    assert fitted.hidden == ["kv", "waiting", "running", "pid"]
    assert fitted.widths == [14, 15, 5, 7, 19] and sum(fitted.widths) + 3 * 5 + 1 == 76
    wide = fit_table(COLUMNS, ROWS, None, OPTIONAL)
    assert wide.columns == COLUMNS[:9] and wide.hidden == []  # adapters (all "-") and detail (all "") dropped


def test_at_100_columns_fewer_are_hidden() -> None:
    fitted = fit_table(COLUMNS, ROWS, 100, OPTIONAL)
    assert fitted.hidden == ["kv", "waiting"] and "pid" in fitted.columns


@pytest.mark.parametrize("width", [80, 100])
def test_no_line_is_wider_and_no_token_is_split(width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    text = shown(COLUMNS, ROWS, width, optional=OPTIONAL)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width
    for token in ("orchestrator/0", "127.0.0.1:18100", "sim/orchestrator-8b", "retrieval", "700 ms"):
        assert any(token in line for line in lines), token
    assert lines[-1].startswith("(hidden: ")  # what is hidden is said


def test_long_paths_keep_their_tail(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    log = "/var/lib/a-long-cluster-path/ops-state/local/logs/orchestrator-0.log"
    assert shorten_path(log, 24) == "…/orchestrator-0.log"  # "logs/" does not fit in 24 as well
    assert shorten_path(log, 26) == "…/logs/orchestrator-0.log"
    assert shorten_path(log, 5) == "…/orchestrator-0.log"  # never below its file name
    fitted = fit_table(["process", "state", "log"], [("orchestrator/0", "running", log)], 60)
    assert fitted.rows == [["orchestrator/0", "running", "…/logs/orchestrator-0.log"]]
    inside = str(tmp_path / "runs" / "chat-local" / "eval.log")
    assert fit_table(["log"], [(inside,)], 200).rows == [["runs/chat-local/eval.log"]]  # relative to here


def test_a_whole_column_keeps_each_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "50")
    rows = [("a run dir with a long name", "finished", "answer 70.0% ± 20.1\njudge 50.0% ± 21.9")]
    fitted = fit_table(["run", "state", "score"], rows, 50, whole=("score",))
    assert fitted.widths == [13, 8, 19]  # the room goes to the run's name, which wraps at its spaces
    text = shown(["run", "state", "score"], rows, 50, whole=("score",))
    assert "answer 70.0% ± 20.1" in text and "judge 50.0% ± 21.9" in text


def test_columns_is_honoured_when_piped_and_wide_is_unlimited(monkeypatch: pytest.MonkeyPatch) -> None:
    piped = io.StringIO()
    monkeypatch.setenv("COLUMNS", "80")
    assert render.output_width(piped) == 80
    monkeypatch.delenv("COLUMNS")
    assert render.output_width(piped) is None  # piped, no COLUMNS: nothing is cut
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv(render.WIDE_ENV, "1")
    assert render.output_width(piped) is None
