"""Every way into an eval reaches the one session (orchestra_ops/api/session.py), and it releases the run dir
on every exit: `ops eval` (success, a launch failure, Ctrl-C), `orchestra_ops.api.evaluate` in this process
(success, an OpsError, any exception, a Ctrl-C outside the loop), the supervised child of `--detach` (stopped,
then finished) and `ops posttrain` (its time limit, then the same call again).

What proves the session ran is what only it writes: `.lock` emptied (a clean release; a process that merely
exits leaves its holder record behind), `error: …` as the last words of eval.log, the analysis at the end;
and a second run on the same run dir then starts at once (no "took over the lock" note) and finishes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import signal
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from orchestra_ops.evals.chat.suite import ChatSuite

from orchestra_ops.api import EvalOptions, EvalResult, evaluate
from orchestra_ops.errors import LaunchError
from orchestra_ops.runner.dataset import Sample
from orchestra_ops.runner.lock import RunDirLock
from orchestra_ops.runner.progress import Progress
from orchestra_ops.runner.results import TaskId
from orchestra_ops.runner.tee import TeeLog
from orchestra_ops.supervise.supervisor import STOP_FILE
from tests.adapters import make_adapter
from tests.chaos.chaos_fixtures import chat_eval, module_sim, start_ops
from tests.chaos.supervise_fixtures import detached_fixture, run_info, supervisor_state, wait_until  # noqa: F401
from tests.helpers import OPS, free_port, frozen, kill_tree, run_ops
from tests.integration.eval_fixtures import dataset, model_config, results, wait_lines
from tests.integration.test_posttrain import (
    CLOSE,
    Harness,
    harness_fixture,  # noqa: F401 (the `harness` fixture)
)
from tests.simserver import SimServer

IDS = [f"q{i}" for i in range(60)]
TOOK_OVER = "took over the lock"
Detach = Callable[[list[str], Path], subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def sim(tmp_path_factory: Any) -> Iterator[SimServer]:
    yield from module_sim(tmp_path_factory, ["--latency-ms", "100"])


def released(run_dir: Path) -> bool:
    """The lock was released cleanly (the file names no holder) and nobody holds it now."""
    if (run_dir / ".lock").read_text() != "":
        return False
    lock = RunDirLock.acquire(run_dir)  # a held flock refuses this, in this process too (one per open file)
    lock.release()
    return lock.takeover is None


def log_lines(run_dir: Path) -> list[str]:
    return (run_dir / "eval.log").read_text().splitlines()


def ids_once(run_dir: Path, ids: list[str]) -> bool:
    records = results(run_dir)
    return Counter(r["id"] for r in records) == Counter(ids) and all(r["status"] == "ok" for r in records)


# ---- ops eval ------------------------------------------------------------------------------------------------

def test_ops_eval_success_analyses_and_releases_then_a_resume_starts_at_once(tmp_path: Path, sim: SimServer) -> None:
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    run_dir = tmp_path / "run"
    args = ["eval", "chat", "--model-config", str(config), "--run-dir", str(run_dir)]
    done = run_ops([*args, "--dataset", str(dataset(tmp_path / "d.jsonl", IDS[:8]))])
    assert done.returncode == 0, done.stderr
    assert released(run_dir)
    assert log_lines(run_dir)[-2] == f"report: {run_dir / 'analysis' / 'report.html'}"  # the session's analysis
    assert log_lines(run_dir)[-1].startswith("chat: 8/8 answered, not graded · 8/8 ok · ")  # then the result line
    assert (run_dir / "analysis" / "stats.json").is_file()
    again = run_ops([*args, "--resume", "--no-analyze"])
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("ops eval chat on mc: 8 samples, 0 to run (resume; 8 ok and 0 failed before)\n")
    assert TOOK_OVER not in again.stdout and released(run_dir)


def test_ops_eval_launch_failure_releases_the_lock_and_the_run_dir_then_runs(tmp_path: Path, sim: SimServer) -> None:
    config = tmp_path / "mc.json"
    config.write_text(json.dumps({"m": [{"ip_addr": "127.0.0.1", "port": free_port()}]}))  # nothing listens there
    data = dataset(tmp_path / "d.jsonl", IDS[:6])
    run_dir = tmp_path / "run"
    failed = run_ops(chat_eval(config, run_dir, "--dataset", str(data)), timeout=120)
    assert failed.returncode == 3, failed.stderr
    assert released(run_dir)
    assert "error: preflight: 1 model(s) this run calls has no live replica (nothing was run):" in log_lines(run_dir)
    model_config(config, {"m": [sim]})  # the model is up now
    resumed = run_ops(chat_eval(config, run_dir, "--resume", "--dataset", str(data)))
    assert resumed.returncode == 0, resumed.stderr
    assert TOOK_OVER not in resumed.stdout and released(run_dir) and ids_once(run_dir, IDS[:6])


def test_ops_eval_ctrl_c_mid_run_is_130_releases_the_lock_and_resume_finishes(tmp_path: Path, sim: SimServer) -> None:
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    run_dir = tmp_path / "run"
    proc = start_ops(chat_eval(config, run_dir, "--dataset", str(dataset(tmp_path / "d.jsonl", IDS)),
                               "--concurrency", "2"))  # 60 prompts at 2 x 10/s: about 3 s
    try:
        wait_lines(run_dir / "results.jsonl", 6, proc)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        kill_tree(proc.pid)
    assert proc.returncode == 130, err
    assert released(run_dir)
    assert log_lines(run_dir)[-1].startswith("error: interrupted after ")
    assert 0 < len(results(run_dir)) < len(IDS)
    resumed = run_ops(chat_eval(config, run_dir, "--resume"))
    assert resumed.returncode == 0, resumed.stderr
    assert TOOK_OVER not in resumed.stdout and released(run_dir) and ids_once(run_dir, IDS)


# ---- orchestra_ops.api.evaluate in this process ----------------------------------------------------------------

class ScorerBreaks(ChatSuite):
    """The chat suite whose scorer raises: an exception that is not ours, after every unit ran."""

    def score(self, records: Mapping[TaskId, dict[str, Any]], units: list[Sample]) -> dict[str, Any] | None:
        raise RuntimeError("the scorer broke")


@contextlib.contextmanager
def ctrl_c_display(tee: TeeLog, progress: Progress, run_dir: Path) -> Iterator[None]:
    raise KeyboardInterrupt  # Ctrl-C outside the loop (no handler of ours is installed there)
    yield


def open_files_in(run_dir: Path) -> list[str]:
    """The files of `run_dir` this process still has open."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith(str(run_dir)):
                found.append(target)
    return found


def test_evaluate_in_process_returns_the_result_and_uses_the_callers_sinks(tmp_path: Path, sim: SimServer) -> None:
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    run_dir = tmp_path / "run"
    lines: list[str] = []
    seen: list[tuple[str, int, Path]] = []

    @contextlib.contextmanager
    def display(tee: TeeLog, progress: Progress, where: Path) -> Iterator[None]:
        seen.append(("enter", progress.total, where))
        yield
        seen.append(("exit", progress.finished, where))

    logger = logging.getLogger("orchestra_ops")
    handlers, propagate = list(logger.handlers), logger.propagate
    options = EvalOptions(dataset=str(dataset(tmp_path / "d.jsonl", IDS[:8])), run_dir=str(run_dir),
                          model_config=str(config), concurrency=4)
    result = evaluate(options, "chat", console=lines.append, display=display, verbose=True)  # every detail too
    assert isinstance(result, EvalResult)
    assert (result.run_dir, result.suite, result.units, result.ran, result.ok, result.failed) == (
        run_dir, "chat", 8, 8, 8, 0)
    assert (result.total_ok, result.total_failed, result.missing) == (8, 0, 0)
    calls = [json.loads(line) for line in (run_dir / "profile.jsonl").read_text().splitlines()]
    calls = [c for c in calls if c.get("type", "model_call") == "model_call"]
    row = {"calls": 8, "prompt_tokens": sum(c["prompt_tokens"] for c in calls),
           "completion_tokens": sum(c["completion_tokens"] for c in calls), "cost_usd": None, "cache_hits": 0,
           "cache_hit_prompt_tokens": 0, "cache_hit_completion_tokens": 0}
    assert len(calls) == 8 and row["prompt_tokens"] > 0
    assert result.scores == {"suite": "chat", "model": "m", "units": 8, "ok": 8, "failed": 0, "failed_by_type": {},
                             "missing": 0, "usage": {"by_role": {"m": row}, "total": row},
                             "headline_scores": {"metric": "answered", "scores": [], "differences": [],
                                                 "note": "8/8 answered, not graded"}}
    assert result.scores_file == run_dir / "scores.json" and json.loads(result.scores_file.read_text()) == result.scores
    assert result.stats_file == run_dir / "analysis" / "stats.json" and result.stats_file.is_file()
    assert result.report_file == run_dir / "analysis" / "report.html" and result.report_file.is_file()
    assert seen == [("enter", 8, run_dir), ("exit", 8, run_dir)]
    assert lines == log_lines(run_dir)  # the console got every line eval.log got, the library printed nothing
    assert sum(line.startswith("[TASK_COMPLETE] ") for line in lines) == 8
    assert (list(logger.handlers), logger.propagate) == (handlers, propagate)
    assert released(run_dir) and open_files_in(run_dir) == []

    quiet: list[str] = []  # without verbose: the banner, the lines the user must see, the result line
    evaluate(dataclasses.replace(options, resume=True), "chat", console=quiet.append)
    assert quiet[:3] == ["ops eval chat on mc: 8 samples, 0 to run (resume; 8 ok and 0 failed before)",
                         "models called: m [1 replica]",
                         f"run dir {run_dir} (every line also in eval.log; -v shows the routing, aliases, budgets "
                         "and sandbox)"]
    assert quiet[-1].startswith("chat: 8/8 answered, not graded · 8/8 ok · ") and quiet[-1].endswith(str(run_dir))
    assert not any(line.startswith("routing (") for line in quiet)
    assert any(line.startswith("routing (") for line in log_lines(run_dir))  # the details: in eval.log

    again = evaluate(EvalOptions(run_dir=str(run_dir), model_config=str(config), resume=True), ChatSuite(),
                     analyze=False)  # a Suite object, not a name
    assert (again.units, again.ran, again.total_ok, again.report_file) == (8, 0, 8, None)
    assert released(run_dir)


@pytest.mark.parametrize("way", ["launch_error", "any_exception", "ctrl_c_outside_the_loop"])
def test_evaluate_in_process_releases_everything_on_every_exit(tmp_path: Path, sim: SimServer, way: str) -> None:
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    if way == "launch_error":
        config.write_text(json.dumps({"m": [{"ip_addr": "127.0.0.1", "port": free_port()}]}))
    run_dir = tmp_path / "run"
    options = EvalOptions(dataset=str(dataset(tmp_path / "d.jsonl", IDS[:6])), run_dir=str(run_dir),
                          model_config=str(config), concurrency=3)
    logger = logging.getLogger("orchestra_ops")
    handlers, propagate = list(logger.handlers), logger.propagate
    lines: list[str] = []
    if way == "launch_error":
        with pytest.raises(LaunchError, match="no live replica"):
            evaluate(options, "chat", console=lines.append)
        assert "error: preflight: 1 model(s) this run calls has no live replica (nothing was run):" in log_lines(
            run_dir)
        assert not any(line.startswith("error:") for line in lines)  # the caller shows the exception itself
    elif way == "any_exception":
        with pytest.raises(RuntimeError, match="the scorer broke"):
            evaluate(options, ScorerBreaks(), console=lines.append)
        assert ids_once(run_dir, IDS[:6])  # every unit ran and was kept before the scorer broke
    else:
        with pytest.raises(KeyboardInterrupt):
            evaluate(options, "chat", console=lines.append, display=ctrl_c_display)
        assert not (run_dir / "results.jsonl").exists()
    assert (list(logger.handlers), logger.propagate) == (handlers, propagate)
    assert released(run_dir) and open_files_in(run_dir) == []

    model_config(config, {"m": [sim]})
    after = evaluate(EvalOptions(dataset=str(tmp_path / "d.jsonl"), run_dir=str(run_dir), model_config=str(config),
                                 resume=True), "chat", console=lines.append, analyze=False)
    assert after.total_ok == 6 and ids_once(run_dir, IDS[:6])
    assert not any(TOOK_OVER in line for line in lines) and released(run_dir)


# ---- the supervised child of --detach --------------------------------------------------------------------------

def test_the_supervised_child_of_detach_releases_the_lock_when_stopped_and_when_done(
        tmp_path: Path, sim: SimServer, detached: Detach) -> None:
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    ids = [f"s{i}" for i in range(200)]
    args = ["eval", "chat", "--model-config", str(config), "--dataset", str(dataset(tmp_path / "d.jsonl", ids)),
            "--concurrency", "2", "--progress-every", "0.3"]  # 200 prompts at 2 x 10/s: about 10 s
    run_dir = tmp_path / "runs" / "chat-detach"
    started = detached(args, run_dir)
    assert started.returncode == 0, started.stderr
    wait_until(lambda: (run_dir / "results.jsonl").exists() and len(results(run_dir)) >= 10, "10 results")
    stopping = subprocess.Popen([*OPS, "stop", str(run_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
    try:
        with frozen(sim.pid):  # the run stays mid-way however long a loaded machine takes to start `ops stop`
            wait_until(lambda: (run_dir / STOP_FILE).exists(), "ops stop asked the run to stop")
        _out, err = stopping.communicate(timeout=300)
    finally:
        kill_tree(stopping.pid)
    assert stopping.returncode == 0, err
    assert [(a["outcome"], a["exit"]) for a in run_info(run_dir)["attempts"]] == [("stopped", 130)]
    assert released(run_dir)  # the child's session released it on SIGTERM (Interrupted)
    assert "error: interrupted after " in (run_dir / "eval.log").read_text()

    again = detached([*args, "--resume"], run_dir)
    assert again.returncode == 0, again.stderr
    wait_until(lambda: supervisor_state(run_dir) == "finished", "the resumed run finished")
    assert released(run_dir) and ids_once(run_dir, ids)
    report = run_dir / "analysis" / "report.html"
    assert report.is_file() and f"report: {report}" in log_lines(run_dir)  # the session's analysis, in the child
    assert TOOK_OVER not in (run_dir / "eval.log").read_text()
    status = run_ops(chat_eval(config, run_dir, "--resume"))
    assert status.returncode == 0 and "200 samples, 0 to run (resume; 200 ok and 0 failed before)" in status.stdout


# ---- ops posttrain ------------------------------------------------------------------------------------------

def test_ops_posttrain_releases_the_lock_after_its_time_limit_and_the_same_call_resumes(
        harness: Harness, tmp_path: Path) -> None:
    topology = harness.topology(latency_ms=400, replicas=1)
    make_adapter(tmp_path / "adapters" / CLOSE)
    args = ["posttrain", "--topology", str(topology), "--model", "base", "--adapter", f"{CLOSE}=adapters/{CLOSE}",
            "--datasets", "gsm8k", "--concurrency", "4"]
    up = harness.ops("up", str(topology))
    assert up.returncode == 0, up.stderr
    cut = harness.ops(*args, "--timeout", "3")
    assert cut.returncode == 124, cut.stderr
    run_dir = tmp_path / "runs" / f"posttrain-{CLOSE}-pt"
    assert released(run_dir)  # posttrain used to leave run.lock to the process's exit, its holder still named
    assert log_lines(run_dir)[-1].startswith("error: the time limit was reached after ")  # written by the session
    done = harness.ops(*args, "--timeout", "600", "--json")  # 40 pairs of gsm8k: the interval holds -1 point
    assert done.returncode == 6, done.stderr
    assert released(run_dir) and TOOK_OVER not in (run_dir / "eval.log").read_text()
    assert json.loads(done.stdout)["verdict"] == "inconclusive"
