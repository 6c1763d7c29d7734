"""The live progress display of `ops eval` in a real pseudo-terminal (tmux), and plain lines without one;
the analysis at the end of every eval (and --no-analyze)."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from pathlib import Path

from tests.helpers import REPO, run_ops
from tests.integration.eval_fixtures import dataset, model_config, results
from tests.simserver import SimServer
from tests.terminal import Terminal


def test_live_display_on_a_terminal(tmp_path: Path, terminal: Terminal,
                                    sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("m", args=["--latency-ms", "150", "--jitter", "0.5", "--seed", "4"])
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    data = dataset(tmp_path / "d.jsonl", [f"s{i}" for i in range(40)])
    run_dir = tmp_path / "run"
    argv = [sys.executable, "-m", "orchestra_ops", "eval", "chat", "--model-config", str(config), "--dataset",
            str(data), "--run-dir", str(run_dir), "--concurrency", "4", "--progress-every", "0.2"]
    terminal.run(f"cd {shlex.quote(str(REPO))} && {shlex.join(argv)}")
    screen = terminal.wait_for("EXIT=")
    assert "EXIT=0" in screen, screen
    assert f"ops eval chat · {run_dir}" in screen  # the panel's title
    assert "40/40 tasks (100.0%)" in screen
    assert "done 40   failed 0   in flight 0" in screen
    assert "last minute: tasks p50" in screen and "model calls p50" in screen and "(n=40)" in screen
    assert screen.count("in flight") == 1, screen  # one display, redrawn in place: no trail of old frames
    assert "[TASK_COMPLETE]" not in screen  # replaced by the display on a terminal ...
    log = (run_dir / "eval.log").read_text()
    assert log.count("[TASK_COMPLETE]") == 40  # ... and still in eval.log, one per task
    assert "[PROGRESS]" in log
    assert "chat: 40/40 answered, not graded" in screen  # lines printed during the run land above the display
    assert f"report: {run_dir / 'analysis' / 'report.html'}" in screen
    assert (run_dir / "analysis" / "report.html").is_file()
    assert len(results(run_dir)) == 40


def test_plain_lines_without_a_terminal(tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("m", args=["--latency-ms", "20"])
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    ids = [f"s{i}" for i in range(30)]
    data = dataset(tmp_path / "d.jsonl", ids)
    run_dir = tmp_path / "run"
    proc = run_ops(["eval", "chat", "--model-config", str(config), "--dataset", str(data), "--run-dir",
                    str(run_dir), "--concurrency", "4", "--progress-every", "0.1"])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    completed = [line for line in lines if line.startswith("[TASK_COMPLETE] ")]
    assert sorted(line.split()[1] for line in completed) == sorted(f"id={i}" for i in ids)
    assert any(line.startswith("[PROGRESS] done=") for line in lines)
    assert "\x1b[" not in proc.stdout and "╭" not in proc.stdout  # no escape codes, no panel
    log = (run_dir / "eval.log").read_text().splitlines()
    assert [line for line in log if line.startswith("[TASK_COMPLETE] ")] == completed
    assert lines[-2] == f"report: {run_dir / 'analysis' / 'report.html'}"
    assert lines[-1].startswith("chat: 30/30 answered, not graded · 30/30 ok · ")  # the result line
    assert lines[-1].endswith(f" · {run_dir}")
    assert (run_dir / "analysis" / "stats.json").is_file()


def test_no_analyze_skips_the_analysis(tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("m", args=["--latency-ms", "5"])
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    run_dir = tmp_path / "run"
    proc = run_ops(["eval", "chat", "--model-config", str(config), "--dataset",
                    str(dataset(tmp_path / "d.jsonl", range(5))), "--run-dir", str(run_dir), "--no-analyze"])
    assert proc.returncode == 0, proc.stderr
    assert "report:" not in proc.stdout and not (run_dir / "analysis").exists()
    later = run_ops(["analyze", str(run_dir), "--json", "--no-plots"])  # the same analysis, run later
    assert later.returncode == 0, later.stderr
    assert '"finished": 5' in later.stdout
