"""`ops eval tau2` when the user simulator misbehaves: one that hangs (the engine's deadline, and a
per-call timeout), one that never stops (max steps), and an agent whose tool calls are invalid
(counted toward max errors). Every simulation ends; scores count what they leave out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.helpers import run_ops
from tests.integration.agent_fixtures import read_jsonl
from tests.integration.tau2_fixtures import task_file, tau2_fleet
from tests.simserver import SimServer


def _run(tmp_path: Path, agent: SimServer, user: SimServer, judge: SimServer, tasks: list[str],
         extra: list[str]) -> tuple[Path, Any]:
    home = tmp_path / "ops"
    topology = tau2_fleet(home, agent, user, judge)
    run_dir = tmp_path / "run"
    result = run_ops(["eval", "tau2", "--no-analyze", "--topology", str(topology), "--run-dir", str(run_dir),
                      "--task-file", str(task_file(tmp_path / "tasks.json", tasks)), *extra],
                     env={"OPS_HOME": str(home)}, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir, result


def test_a_hanging_user_simulator_is_cut_by_the_deadline_and_by_the_call_timeout(tmp_path: Path) -> None:
    fast = ["--latency-ms", "2"]
    with SimServer("sim/agent", args=fast, log_dir=tmp_path) as agent, \
            SimServer("sim/user", args=[*fast, "--hang-rate", "1"], log_dir=tmp_path) as user, \
            SimServer("sim/judge", args=fast, log_dir=tmp_path) as judge:
        run_dir, _ = _run(tmp_path / "deadline", agent, user, judge, ["book_pilates", "cancel_spin"],
                            ["--trials", "2", "--timeout", "120", "--task-timeout", "2"])
        records = read_jsonl(run_dir / "results.jsonl")
        assert sorted(r["id"] for r in records) == ["book_pilates#0", "book_pilates#1", "cancel_spin#0",
                                                      "cancel_spin#1"]
        assert {(r["status"], r["error_type"]) for r in records} == {("error", "task_timeout")}
        scores = json.loads((run_dir / "scores.json").read_text())
        assert (scores["evaluated"], scores["infra_errors"], scores["infra_errors_by_type"]) == (
            0, 4, {"task_timeout": 4})
        assert scores["pass_hat_k"] == {} and scores["avg_reward"] == 0.0
        assert "left out: 4 infrastructure error(s) (task_timeout 4)" in (run_dir / "eval.log").read_text()

        run_dir, _ = _run(tmp_path / "call", agent, user, judge, ["book_pilates"],
                          ["--timeout", "1", "--max-retries", "1"])
        (record,) = read_jsonl(run_dir / "results.jsonl")
        assert (record["status"], record["termination_reason"], record["steps"]) == (
            "error", "infrastructure_error", 0)
        assert "reward" not in record
        trajectory = json.loads((run_dir / record["trajectory"]).read_text())
        assert [m["content"] for m in trajectory["messages"]] == ["Hi! How can I help you today?"]
        assert json.loads((run_dir / "scores.json").read_text())["infra_errors"] == 1


def test_a_user_that_never_stops_ends_at_max_steps_and_invalid_calls_at_max_errors(tmp_path: Path) -> None:
    with SimServer("sim/agent", args=["--latency-ms", "2"], log_dir=tmp_path) as agent, \
            SimServer("sim/user", args=["--latency-ms", "2"], log_dir=tmp_path) as user, \
            SimServer("sim/judge", args=["--latency-ms", "2"], log_dir=tmp_path) as judge:
        run_dir, _ = _run(tmp_path / "steps", agent, user, judge, ["endless_chat", "invalid_tools"],
                          ["--max-steps", "7", "--max-errors", "3"])
        records = {r["task_id"]: r for r in read_jsonl(run_dir / "results.jsonl")}
        endless, invalid = records["endless_chat"], records["invalid_tools"]
        assert (endless["termination_reason"], endless["steps"], endless["reward"]) == ("max_steps", 7, 0.0)
        messages = json.loads((run_dir / endless["trajectory"]).read_text())["messages"]
        assert [m["role"] for m in messages] == ["assistant", *["user", "assistant"] * 3, "user"]
        assert all("###" not in (m["content"] or "") for m in messages)
        assert (invalid["termination_reason"], invalid["errors"], invalid["steps"], invalid["reward"]) == (
            "too_many_errors", 3, 7, 0.0)
        tool_messages = [m for m in json.loads((run_dir / invalid["trajectory"]).read_text())["messages"]
                         if m["role"] == "tool"]
        assert [m["error"] for m in tool_messages] == [True, True, True]
        scores = json.loads((run_dir / "scores.json").read_text())
        assert scores["termination_reasons"] == {"max_steps": 1, "too_many_errors": 1}
        assert (scores["evaluated"], scores["avg_reward"], scores["pass_hat_k"]) == (2, 0.0, {"1": 0.0})
