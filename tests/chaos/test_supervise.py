"""A detached eval finishes by itself: kill -9 of its eval -> rerun with --resume -> every id exactly once;
the restart bound -> crashed and an event; `ops stop` -> stopped, no restart; `ops attach` in a real
pseudo-terminal (Ctrl-C detaches, the run goes on); a hanging sim -> a stall report naming the call each
task waits on. `ops runs --json` is read in every state. Real sims, real `ops` subprocesses, real tmux."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from tests.chaos.supervise_fixtures import (
    attempt_pid,
    detached_fixture,  # noqa: F401 (the `detached` fixture)
    events,
    run_info,
    runs_json,
    supervisor_state,
    wait_until,
)
from tests.helpers import OPS, REPO, frozen_once, kill_tree, run_ops
from tests.integration.eval_fixtures import dataset, model_config, results
from tests.simserver import SimServer
from tests.terminal import Terminal

Detach = Callable[[list[str], Path], subprocess.CompletedProcess[str]]


def _eval_args(tmp_path: Path, sim: SimServer, count: int, *extra: str) -> list[str]:
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    data = dataset(tmp_path / "d.jsonl", [f"s{i}" for i in range(count)])
    return ["eval", "chat", "--no-analyze", "--model-config", str(config), "--dataset", str(data),
            "--concurrency", "4", "--progress-every", "0.3", *extra]


def test_kill_9_of_the_eval_is_resumed_and_every_id_lands_once(
        tmp_path: Path, sim_server: Callable[..., SimServer], detached: Detach) -> None:
    sim = sim_server("m", args=["--latency-ms", "100", "--seed", "3"])
    runs, notified = tmp_path / "runs", tmp_path / "notified.jsonl"
    run_dir = runs / "chat-kill9"
    started = detached([*_eval_args(tmp_path, sim, 400, "--restart-backoff", "0.2",
                                    "--notify", f"cat >> {notified}")], run_dir)
    assert started.returncode == 0, started.stderr
    assert f"detached: {run_dir}" in started.stdout and f"ops attach {run_dir}" in started.stdout

    first = wait_until(lambda: attempt_pid(run_dir, 1), "attempt 1 started")
    wait_until(lambda: len(results(run_dir)) >= 30 if (run_dir / "results.jsonl").exists() else False,
               "30 results written")
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: attempt_pid(run_dir, 2), "attempt 2 started")
    row = runs_json(runs)["chat-kill9"]  # attempt 2 runs for seconds: 360+ tasks at 4 x 10/s
    assert row["state"] == "running" and row["suite"] == "chat" and row["topology"] == "mc"
    assert row["where"].startswith(f"{run_info(run_dir)['supervisor']['pid']}@") and row["total"] == 400

    wait_until(lambda: supervisor_state(run_dir) == "finished", "the run finished")
    records = results(run_dir)
    assert Counter(r["id"] for r in records) == Counter(f"s{i}" for i in range(400))  # every id exactly once
    assert all(r["status"] == "ok" for r in records)
    info = run_info(run_dir)
    one, two = info["attempts"]
    assert (one["n"], one["pid"], one["signal"], one["exit"], one["outcome"]) == (1, first, "SIGKILL", None, "restart")
    assert one["resume"] is False and one["reason"].startswith("killed by SIGKILL")
    assert (two["n"], two["resume"], two["exit"], two["outcome"]) == (2, True, 0, "finished")
    assert two["done_before"] == one["done_after"] and two["done_after"] == 400
    assert all(a["host"] and a["start"] and a["end"] for a in (one, two))
    assert info["supervisor"]["restarts"] == 1 and info["supervisor"]["state"] == "finished"
    kinds = [e["event"] for e in events(run_dir)]
    assert kinds == ["restart", "finished"]
    assert events(run_dir)[0]["reason"].startswith("killed by SIGKILL") and events(run_dir)[1]["done"] == 400
    log = (run_dir / "eval.log").read_text()
    assert "[SUPERVISOR] attempt 1 crashed: killed by SIGKILL" in log and "restart 1 of 5" in log
    assert "(--resume)" in log
    wait_until(lambda: notified.exists() and len(notified.read_text().splitlines()) == 2, "both events notified")
    assert [json.loads(line)["event"] for line in notified.read_text().splitlines()] == ["restart", "finished"]
    row = runs_json(runs)["chat-kill9"]
    assert (row["state"], row["done"], row["failed"], row["total"], row["attempts"]) == ("finished", 400, 0, 400, 2)


def test_the_restart_bound_ends_the_run_as_crashed(
        tmp_path: Path, sim_server: Callable[..., SimServer], detached: Detach) -> None:
    sim = sim_server("m", args=["--latency-ms", "100"])
    runs = tmp_path / "runs"
    run_dir = runs / "chat-bound"
    started = detached([*_eval_args(tmp_path, sim, 2000, "--max-restarts", "1", "--restart-backoff", "8",
                                    "--notify", "exit 3")], run_dir)  # a notify command that fails: never fatal
    assert started.returncode == 0, started.stderr
    os.kill(wait_until(lambda: attempt_pid(run_dir, 1), "attempt 1 started"), signal.SIGKILL)
    supervisor = run_info(run_dir)["supervisor"]["pid"]
    with frozen_once(supervisor, lambda: supervisor_state(run_dir) == "restarting", "restarting"):  # in its backoff
        assert runs_json(runs)["chat-bound"]["state"] == "restarting"  # the backoff (8 s) before attempt 2
    second = wait_until(lambda: attempt_pid(run_dir, 2), "attempt 2 started")
    os.kill(second, signal.SIGKILL)

    wait_until(lambda: supervisor_state(run_dir) == "crashed", "crashed")
    info = run_info(run_dir)
    assert [a["outcome"] for a in info["attempts"]] == ["restart", "restart"]
    assert info["supervisor"]["restarts"] == 1
    assert "gave up after 1 restart(s) (--max-restarts 1)" in info["supervisor"]["reason"]
    assert [e["event"] for e in events(run_dir)] == ["restart", "crashed"]
    assert events(run_dir)[-1]["attempts"] == 2
    assert "warning: --notify command exited 3" in (run_dir / "eval.log").read_text()  # logged, never fatal
    row = runs_json(runs)["chat-bound"]
    assert (row["state"], row["attempts"], row["restarts"]) == ("crashed", 2, 1)


def test_attach_in_a_terminal_detaches_on_ctrl_c_then_ops_stop_stops_cleanly(
        tmp_path: Path, sim_server: Callable[..., SimServer], detached: Detach, terminal: Terminal) -> None:
    sim = sim_server("m", args=["--latency-ms", "100"])
    runs = tmp_path / "runs"
    run_dir = runs / "chat-stop"
    started = detached(_eval_args(tmp_path, sim, 3000), run_dir)
    assert started.returncode == 0, started.stderr
    wait_until(lambda: (run_dir / "live.json").exists(), "the eval is live")

    terminal.run(f"cd {REPO} && {sys.executable} -m orchestra_ops attach {run_dir}")
    terminal.wait_for("ops attach · chat-stop")
    screen = terminal.wait_for("state running")
    assert "/3000 tasks" in screen and "Ctrl-C detaches" in screen
    terminal.keys("C-c")
    screen = terminal.wait_for("EXIT=")
    assert f"detached from {run_dir}; it goes on (running)" in screen and "EXIT=0" in screen
    before = len(results(run_dir)) if (run_dir / "results.jsonl").exists() else 0
    wait_until(lambda: len(results(run_dir)) > before + 10, "the run goes on after the detach")
    assert supervisor_state(run_dir) == "running"
    twice = run_ops([*_eval_args(tmp_path, sim, 3000), "--resume", "--run-dir", str(run_dir), "--detach"])
    # refused before anything starts: the run dir's lock names the eval that holds it
    assert twice.returncode == 2 and f"{run_dir} is in use by another `ops eval`: pid " in twice.stderr

    stopped = run_ops(["stop", str(run_dir)])
    assert stopped.returncode == 0, stopped.stderr
    assert f"{run_dir}: stopped (" in stopped.stdout
    info = run_info(run_dir)
    assert info["supervisor"]["state"] == "stopped" and info["supervisor"]["restarts"] == 0
    assert [a["outcome"] for a in info["attempts"]] == ["stopped"] and info["attempts"][0]["exit"] == 130
    records = results(run_dir)
    assert 0 < len(records) < 3000 and len({r["id"] for r in records}) == len(records)
    assert [e["event"] for e in events(run_dir)] == ["stopped"]
    row = runs_json(runs)["chat-stop"]
    assert (row["state"], row["done"]) == ("stopped", len(records))
    again = run_ops(["stop", str(run_dir)])
    assert again.returncode == 2 and "is not running (state stopped)" in again.stderr


def test_a_hanging_sim_is_reported_as_a_stall_with_the_call_each_task_waits_on(
        tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("m", args=["--hang-rate", "1.0"])
    runs = tmp_path / "runs"
    run_dir = runs / "chat-stall"
    args = [*_eval_args(tmp_path, sim, 10), "--concurrency", "2", "--stall-after", "1.5", "--timeout", "600",
            "--run-dir", str(run_dir)]
    proc = subprocess.Popen([*OPS, *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: "[STALL]" in (run_dir / "eval.log").read_text() if (run_dir / "eval.log").exists()
                   else False, "a stall report")
        stall = [e for e in events(run_dir) if e["event"] == "stall"]
        assert len(stall) == 1
        assert stall[0]["in_flight"] == 2 and stall[0]["threshold_s"] == 1.5
        chat_url = f"http://127.0.0.1:{sim.port}/v1/chat/completions"
        assert sorted(t["task"] for t in stall[0]["tasks"]) == ["s0", "s1"]
        for task in stall[0]["tasks"]:
            assert [(c["role"], c["replica"], c["url"]) for c in task["calls"]] == [("m", f"127.0.0.1:{sim.port}",
                                                                                      chat_url)]
            assert task["calls"][0]["waiting_s"] >= 1.5
        log = (run_dir / "eval.log").read_text()
        assert "[STALL] no task has finished for" in log and "2 task(s) in flight" in log
        assert f"waiting on m on 127.0.0.1:{sim.port} ({chat_url})" in log
        row = runs_json(runs)["chat-stall"]
        assert row["state"] == "stalled" and row["where"] == f"{proc.pid}@{row['where'].split('@')[1]}"
        assert row["stall"]["in_flight"] == 2
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        kill_tree(proc.pid)
    row = runs_json(runs)["chat-stall"]
    assert (row["state"], row["done"], row["total"]) == ("crashed", 0, 10)  # its process is gone
    assert not (run_dir / "results.jsonl").exists()  # no task ever finished


def test_a_plain_run_notifies_a_replica_ejected_and_its_end(
        tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("m", args=["--latency-ms", "5"])
    dead = SimServer("m")  # a port nobody listens on: the pool ejects that replica at the first refusal
    config = tmp_path / "mc.json"
    config.write_text(json.dumps({"m": [{"ip_addr": "127.0.0.1", "port": dead.port},
                                        {"ip_addr": "127.0.0.1", "port": sim.port}]}))
    data = dataset(tmp_path / "d.jsonl", [f"s{i}" for i in range(20)])
    run_dir, notified = tmp_path / "runs" / "plain", tmp_path / "notified.jsonl"
    result = run_ops(["eval", "chat", "--no-analyze", "--model-config", str(config), "--dataset", str(data),
                      "--run-dir", str(run_dir), "--concurrency", "2", "--notify", f"cat >> {notified}"])
    assert result.returncode == 0, result.stderr
    assert Counter(r["status"] for r in results(run_dir)) == {"ok": 20}  # retried on the live replica
    kinds = [e["event"] for e in events(run_dir)]
    assert kinds == ["replica_ejected", "finished"]
    ejected, finished = events(run_dir)
    assert (ejected["model"], ejected["replica"]) == ("m", f"127.0.0.1:{dead.port}")
    assert (finished["done"], finished["failed"], finished["total"]) == (20, 0, 20)
    assert [json.loads(line)["event"] for line in notified.read_text().splitlines()] == kinds
    assert json.loads((run_dir / "live.json").read_text())["state"] == "finished"
    assert runs_json(tmp_path / "runs")["plain"]["state"] == "finished"
