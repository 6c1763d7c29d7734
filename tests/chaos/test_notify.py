"""`--notify` never holds a run: each command runs in a process group of its own; one still running after
its limit (what it left in the background too) is killed as a group; at the end the commands still
running get a grace, then their groups are killed; `ops eval` exits without waiting for `sleep 333`.
Real `sh` commands, real process groups, a real `ops eval` over a sim."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from orchestra_ops.runner.run_events import EventLog
from tests.chaos.supervise_fixtures import wait_until
from tests.helpers import kill_tree, run_ops
from tests.integration.eval_fixtures import dataset, model_config
from tests.simserver import SimServer


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


@pytest.fixture
def pid_file(tmp_path: Path) -> Iterator[Path]:
    """Where the commands write the pids they start; whatever is still alive at teardown is killed by pid."""
    path = tmp_path / "pids"
    yield path
    for pid in pids(path):
        if alive(pid):
            kill_tree(pid)


def test_a_command_past_its_limit_is_killed_with_its_group(
        tmp_path: Path, pid_file: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = EventLog(tmp_path, f"sleep 333 & echo $! >> {pid_file}; wait", timeout_s=1)
    with caplog.at_level(logging.WARNING, logger="orchestra_ops.runner.run_events"):
        log.emit("stall", in_flight=2)
        (sleeper,) = wait_until(lambda: pids(pid_file), "the command started its sleep")
        wait_until(lambda: not alive(sleeper), "the sleep killed with its group", timeout_s=30)
        log.close(grace_s=0)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and warnings[0].startswith("--notify command did not finish within 1 s; killed it "
                                                         "(process group ")


def test_what_a_command_leaves_in_the_background_is_killed_at_its_limit(
        tmp_path: Path, pid_file: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = EventLog(tmp_path, f"sleep 333 > /dev/null 2>&1 & echo $! >> {pid_file}", timeout_s=1)
    with caplog.at_level(logging.WARNING, logger="orchestra_ops.runner.run_events"):
        log.emit("finished", done=1)
        (sleeper,) = wait_until(lambda: pids(pid_file), "the command started its sleep")
        wait_until(lambda: not alive(sleeper), "the background sleep killed", timeout_s=30)
        log.close(grace_s=0)
    assert [r.getMessage().split(" (process group")[0] for r in caplog.records] == [
        "--notify command left processes running after 1 s; killed it"]


def test_at_the_end_the_commands_get_a_grace_then_their_groups_are_killed(
        tmp_path: Path, pid_file: Path, caplog: pytest.LogCaptureFixture) -> None:
    heard = tmp_path / "heard.jsonl"
    log = EventLog(tmp_path, f"cat >> {heard}; sleep 333 & echo $! >> {pid_file}; wait", timeout_s=600)
    with caplog.at_level(logging.WARNING, logger="orchestra_ops.runner.run_events"):
        log.emit("restart", attempt=1)
        log.emit("finished", done=3)
        wait_until(lambda: len(pids(pid_file)) == 2, "both commands started their sleeps")
        log.close(grace_s=0.5)
    assert not any(alive(pid) for pid in pids(pid_file))
    assert [json.loads(line)["event"] for line in heard.read_text().splitlines()] in (
        ["restart", "finished"], ["finished", "restart"])  # each command read its event on stdin
    assert [r.getMessage().split(" (process group")[0] for r in caplog.records] == [
        "--notify command still running 0.5 s after the run's last event; killed it"] * 2


def test_a_quick_command_hears_its_event_and_nothing_is_logged(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    heard = tmp_path / "heard.jsonl"
    log = EventLog(tmp_path, f"cat >> {heard}")
    with caplog.at_level(logging.WARNING, logger="orchestra_ops.runner.run_events"):
        sent = log.emit("finished", done=3, failed=0, total=3)
        log.close()
    assert json.loads(heard.read_text()) == sent and caplog.records == []


def test_ops_eval_exits_without_waiting_for_a_slow_notify_and_leaves_nothing_running(
        tmp_path: Path, pid_file: Path, sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("m", args=["--latency-ms", "1"])
    run_dir = tmp_path / "run"
    result = run_ops(["eval", "chat", "--no-analyze", "--model-config", str(model_config(tmp_path / "mc.json",
                                                                                        {"m": [sim]})),
                      "--dataset", str(dataset(tmp_path / "d.jsonl", ["a", "b"])), "--run-dir", str(run_dir),
                      "--notify", f"sleep 333 & echo $! >> {pid_file}; wait"], timeout=120)
    assert result.returncode == 0, result.stderr
    (sleeper,) = pids(pid_file)  # one event (finished), one command
    assert not alive(sleeper)  # killed with its group when the grace ran out, not left behind
    log = (run_dir / "eval.log").read_text()
    assert "--notify command still running 5 s after the run's last event; killed it (process group " in log
