"""One writer per run dir: a second `ops eval` on a run dir in use exits 2 at once naming the holder;
a lock left by a killed run is taken over with a note; readers (eval-status) take no lock."""

from __future__ import annotations

import json
import re
import signal
import socket
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.chaos_fixtures import answers, chat_eval, module_sim, start_ops
from tests.helpers import frozen, kill_tree, run_ops
from tests.integration.eval_fixtures import dataset, model_config, results, wait_lines
from tests.simserver import SimServer

IDS = [f"q{i}" for i in range(120)]


@pytest.fixture(scope="module")
def sim(tmp_path_factory: Any) -> Iterator[SimServer]:
    yield from module_sim(tmp_path_factory, ["--latency-ms", "100"])


def _holder(stderr: str) -> tuple[int, str]:
    found = re.search(r"is in use by another `ops eval`: pid (\d+) on host (\S+) since (\S+);", stderr)
    assert found, stderr
    return int(found.group(1)), found.group(2)


def test_two_runs_started_together_and_a_resume_during_the_run(tmp_path: Path, sim: SimServer) -> None:
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    data = dataset(tmp_path / "d.jsonl", IDS)
    run_dir = tmp_path / "run"
    args = chat_eval(config, run_dir, "--dataset", str(data), "--concurrency", "2")
    procs = [start_ops(args), start_ops(args)]
    try:
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            kill_tree(p.pid)
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], outs
    winner, loser = (0, 1) if procs[0].returncode == 0 else (1, 0)
    assert _holder(outs[loser][1]) == (procs[winner].pid, socket.gethostname())
    assert "Traceback" not in outs[loser][1]
    assert Counter(r["id"] for r in results(run_dir)) == Counter(IDS)  # every id exactly once
    assert not (run_dir / ".lock").read_text()  # a clean end leaves no holder behind

    again = tmp_path / "run2"
    first = start_ops(chat_eval(config, again, "--dataset", str(data), "--concurrency", "2"))
    try:
        wait_lines(again / "results.jsonl", 10, first)  # well inside the run (120 tasks, 2 at a time)
        with frozen(sim.pid):  # and it stays inside, however long a loaded machine takes to start `ops`
            resumed = run_ops(chat_eval(config, again, "--resume"))
            status = run_ops(["eval-status", str(again), "--json"])  # a reader: no lock, no wait
        _, err = first.communicate(timeout=120)
    finally:
        kill_tree(first.pid)
    assert resumed.returncode == 2, resumed.stderr
    assert _holder(resumed.stderr) == (first.pid, socket.gethostname())
    assert status.returncode == 0 and json.loads(status.stdout)["missing"] > 0
    assert first.returncode == 0, err
    assert Counter(r["id"] for r in results(again)) == Counter(IDS)
    assert answers(again) == answers(run_dir)


def test_a_lock_left_by_a_killed_run_is_taken_over_with_a_note(tmp_path: Path, sim: SimServer) -> None:
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    data = dataset(tmp_path / "d.jsonl", IDS[:40])
    run_dir = tmp_path / "run"
    proc = start_ops(chat_eval(config, run_dir, "--dataset", str(data), "--concurrency", "4"))
    try:
        wait_lines(run_dir / "results.jsonl", 8, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        kill_tree(proc.pid)
    held = json.loads((run_dir / ".lock").read_text())
    assert held["pid"] == proc.pid and held["host"] == socket.gethostname()
    resumed = run_ops(chat_eval(config, run_dir, "--resume"))
    assert resumed.returncode == 0, resumed.stderr
    note = (f"note: took over the lock of {run_dir} left by a run that did not finish cleanly (pid {proc.pid} "
            f"on host {socket.gethostname()} since {held['since']}; that process no longer holds it)")
    assert note in resumed.stdout
    assert note in (run_dir / "eval.log").read_text()
    assert Counter(r["id"] for r in results(run_dir)) == Counter(IDS[:40])
    assert all(r["status"] == "ok" for r in results(run_dir))


def test_a_refused_run_writes_nothing_in_the_run_dir(tmp_path: Path, sim: SimServer) -> None:
    """The lock is taken before run.json, results.jsonl or eval.log is touched: the holder's files are intact."""
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    data = dataset(tmp_path / "d.jsonl", IDS[:60])
    run_dir = tmp_path / "run"
    proc = start_ops(chat_eval(config, run_dir, "--dataset", str(data), "--concurrency", "1"))
    try:
        wait_lines(run_dir / "results.jsonl", 3, proc)
        with frozen(sim.pid):  # the holder is mid-run until the refused run is done, however slowly it starts
            log_before = (run_dir / "eval.log").read_text()
            run_before = (run_dir / "run.json").read_text()
            fresh = run_ops(chat_eval(config, run_dir, "--dataset", str(data)))
            log_after = (run_dir / "eval.log").read_text()
        assert (run_dir / "run.json").read_text() == run_before
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    finally:
        kill_tree(proc.pid)
    assert fresh.returncode == 2
    assert _holder(fresh.stderr)[0] == proc.pid
    assert log_after.startswith(log_before) and "in use by another" not in log_after
    assert proc.returncode == 130
    done = results(run_dir)
    assert len({r["id"] for r in done}) == len(done)
