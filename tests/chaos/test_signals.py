"""Signals: SIGHUP (a closed terminal, a dropped ssh) stops like SIGTERM: no new tasks, those in flight
finish and are kept, a line in eval.log, --resume finishes the run; a second Ctrl-C aborts cleanly."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.chaos_fixtures import answers, chat_eval, module_sim, start_ops, wait_for
from tests.helpers import REPO, kill_tree, run_ops
from tests.integration.eval_fixtures import dataset, model_config, results, total
from tests.simserver import SimServer

IDS = list(range(60))
NOISE = ("Traceback", "never retrieved", "Task was destroyed", "Exception ignored")


@pytest.fixture(scope="module")
def sim(tmp_path_factory: Any) -> Iterator[SimServer]:
    yield from module_sim(tmp_path_factory, ["--latency-ms", "150"])


@pytest.fixture(scope="module")
def clean(tmp_path_factory: Any, sim: SimServer) -> dict[Any, Any]:
    """The answers of an uninterrupted run of the same dataset (the sim is deterministic)."""
    tmp = tmp_path_factory.mktemp("clean")
    config = model_config(tmp / "mc.json", {"m": [sim]})
    out = run_ops(chat_eval(config, tmp / "run", "--dataset", str(dataset(tmp / "d.jsonl", IDS)),
                            "--concurrency", "30"))
    assert out.returncode == 0, out.stderr
    return answers(tmp / "run")


def _stop_mid_run(tmp_path: Path, sim: SimServer, sig: signal.Signals, *, hang_up: bool) -> tuple[Path, list[str], str]:
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    run_dir = tmp_path / "run"
    base = chat_eval(config, run_dir, "--concurrency", "6")
    before = total([sim], "sim_requests_total")
    proc = start_ops([*base, "--dataset", str(dataset(tmp_path / "d.jsonl", IDS))])
    err = ""
    try:
        wait_for(lambda: total([sim], "sim_requests_total") - before >= 12, proc)
        if hang_up:  # the terminal is gone: nothing reads the console any more
            assert proc.stdout is not None and proc.stderr is not None
            proc.stdout.close()
            proc.stderr.close()
        proc.send_signal(sig)
        if hang_up:
            proc.wait(timeout=60)
        else:
            _, err = proc.communicate(timeout=60)
    finally:
        kill_tree(proc.pid)
    assert proc.returncode == 130, err
    started = total([sim], "sim_requests_total") - before
    done = results(run_dir)
    assert len(done) == started and all(r["status"] == "ok" for r in done)  # every task that started was kept
    assert len(done) < len(IDS)
    return run_dir, base, err


def test_sighup_with_the_terminal_gone_stops_cleanly_and_resumes(tmp_path: Path, sim: SimServer,
                                                                 clean: dict[Any, Any]) -> None:
    run_dir, base, _ = _stop_mid_run(tmp_path, sim, signal.SIGHUP, hang_up=True)
    log = (run_dir / "eval.log").read_text()
    assert "SIGHUP (the terminal or ssh session closed): stopping: no new tasks" in log
    assert "error: interrupted after" in log and "continue with --resume" in log
    resumed = run_ops([*base, "--resume"])
    assert resumed.returncode == 0, resumed.stderr
    assert Counter(r["id"] for r in results(run_dir)) == Counter(IDS)
    assert answers(run_dir) == clean


def test_sigterm_stops_the_same_way(tmp_path: Path, sim: SimServer, clean: dict[Any, Any]) -> None:
    run_dir, base, err = _stop_mid_run(tmp_path, sim, signal.SIGTERM, hang_up=False)
    assert "SIGTERM: stopping: no new tasks" in (run_dir / "eval.log").read_text()
    assert not any(word in err for word in NOISE), err
    resumed = run_ops([*base, "--resume"])
    assert resumed.returncode == 0, resumed.stderr
    assert answers(run_dir) == clean


def test_a_second_ctrl_c_aborts_without_asyncio_noise(tmp_path: Path) -> None:
    sim = SimServer("m", args=["--hang-rate", "1"], log_dir=tmp_path).start()
    try:
        config = model_config(tmp_path / "mc.json", {"m": [sim]})
        run_dir = tmp_path / "run"
        proc = start_ops(chat_eval(config, run_dir, "--dataset", str(dataset(tmp_path / "d.jsonl", range(10))),
                                   "--concurrency", "4"))
        try:
            wait_for(lambda: total([sim], "sim_requests_total") >= 4, proc)
            proc.send_signal(signal.SIGINT)
            wait_for(lambda: "stopping" in (run_dir / "eval.log").read_text(), proc)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        finally:
            kill_tree(proc.pid)
    finally:
        sim.stop()
    assert proc.returncode == 130, err
    assert "aborting 4 task(s) in flight" in out
    assert not any(word in err for word in NOISE), err
    assert err.startswith("error: interrupted after 0 task(s)"), err
    assert not (run_dir / "results.jsonl").exists() or results(run_dir) == []


CANCEL_A_PROGRAM = """
import asyncio, contextlib, gc
from orchestra_ops.sandbox import Sandbox, SandboxPolicy

async def main():
    sandbox = Sandbox(SandboxPolicy(wall_time_s=60, workers=2))
    runs = [asyncio.create_task(sandbox.run("import time\\nprint('started', flush=True)\\ntime.sleep(60)"))
            for _ in range(2)]
    while sandbox.running < 2:
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.0)  # both programs are running, their output being read
    for run in runs:
        run.cancel()  # what a second Ctrl-C does to a task in the sandbox
    for run in runs:
        with contextlib.suppress(asyncio.CancelledError):
            await run
    print("cancelled", all(run.cancelled() for run in runs))

asyncio.run(main())
gc.collect()
"""


def test_aborting_a_task_in_the_sandbox_leaves_no_asyncio_noise() -> None:
    """The agent suites' tasks run model code: aborting them mid-program must not log unread exceptions."""
    proc = subprocess.run([sys.executable, "-c", CANCEL_A_PROGRAM], cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "cancelled True\n"
    assert not any(word in proc.stderr for word in NOISE), proc.stderr
