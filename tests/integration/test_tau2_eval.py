"""`ops eval tau2` over real sims (agent, user simulator, judge): exact rewards and pass^k on the
synthetic domain, the trajectories beside results.jsonl, kill -9 then --resume, and the tau2 export."""

from __future__ import annotations

import itertools
import json
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from orchestra_ops.services.simllm import tau2_rules

from tests.helpers import REPO, run_ops
from tests.integration.agent_fixtures import read_jsonl, write_fleet
from tests.integration.eval_fixtures import kill9_mid_run
from tests.integration.tau2_fixtures import EXPECTED, expected_reward, expected_scores, seeds, tau2_fleet, tau2_sims
from tests.simserver import SimServer

GREETING = "Hi! How can I help you today?"


@pytest.fixture(scope="module")
def sims(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimServer, SimServer, SimServer]]:
    with tau2_sims(tmp_path_factory.mktemp("tau2sims")) as servers:
        yield servers


def _eval(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    result = run_ops(["eval", "tau2", "--no-analyze", *args], env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_synthetic_domain_scores_exactly_and_exports_as_tau2_results(tmp_path: Path, sims: Any) -> None:
    home = tmp_path / "ops"
    topology = tau2_fleet(home, *sims)
    run_dir = tmp_path / "run"
    trials = 4
    out = _eval(["--topology", str(topology), "--run-dir", str(run_dir), "--trials", str(trials),
                 "--max-steps", "30"], {"OPS_HOME": str(home)})
    want = expected_scores(trials)
    scores = json.loads((run_dir / "scores.json").read_text())
    n = len(EXPECTED) * trials
    assert (scores["simulations"], scores["evaluated"], scores["infra_errors"], scores["missing"]) == (n, n, 0, 0)
    assert scores["avg_reward"] == want["avg_reward"] and scores["successes"] == want["successes"]
    assert scores["pass_hat_k"] == want["pass_hat_k"]
    assert list(scores["pass_hat_k"]) == ["1", "2", "3", "4"]
    assert scores["pass_hat_k"]["1"] > scores["pass_hat_k"]["2"]  # the flaky task passes on one trial in four
    assert scores["termination_reasons"] == {"max_steps": trials, "too_many_errors": trials,
                                             "user_stop": n - 2 * trials}
    assert scores["by_domain"] == {"synthetic": {"simulations": n, "avg_reward": want["avg_reward"]}}
    assert f"avg reward {want['avg_reward']:.4f} over {n} simulation(s) of {len(EXPECTED)} task(s)" in \
        (run_dir / "eval.log").read_text()
    assert f"tau2: average reward: orchestrator {100 * want['avg_reward']:.1f}% ± " in out.stdout.splitlines()[-1]

    records = {r["id"]: r for r in read_jsonl(run_dir / "results.jsonl")}
    trial_seeds = seeds(trials)
    assert sorted(records) == sorted(f"{t}#{k}" for t in EXPECTED for k in range(trials))
    for record in records.values():
        task_id, trial = record["task_id"], record["trial"]
        assert record["seed"] == trial_seeds[trial]
        assert (record["reward"], record["termination_reason"]) == (
            expected_reward(task_id, record["seed"]), EXPECTED[task_id][1]), record["id"]
        trajectory = json.loads((run_dir / record["trajectory"]).read_text())
        messages = trajectory["messages"]
        assert messages[0]["role"] == "assistant" and messages[0]["content"] == GREETING
        first_text = next(m for m in messages if m["role"] == "user" and m["content"])
        assert messages[1]["role"] == "user" and first_text["content"].startswith(tau2_rules.FIRST_TEXT)
        assert [m["turn_idx"] for m in messages] == list(range(len(messages)))
        assert trajectory["steps"] == record["steps"] == len(messages) - 1 - sum(
            1 for a, b in itertools.pairwise(messages) if a["role"] == "tool" and b["role"] == "tool")
        calls = {c["id"]: c for m in messages for c in m.get("tool_calls") or ()}
        results = [m for m in messages if m["role"] == "tool"]
        assert sorted(m["id"] for m in results) == sorted(calls)  # every call answered, once
        if record["termination_reason"] == "user_stop":
            assert "###STOP###" in messages[-1]["content"] or "###TRANSFER###" in messages[-1]["content"]
        info = trajectory["reward_info"]
        assert info["reward"] == record["reward"]
        if "db_hashes" in info.get("info", {}):  # absent where neither actions nor env_assertions are given
            predicted, gold = info["info"]["db_hashes"]["predicted"], info["info"]["db_hashes"]["gold"]
            assert info["db_check"]["db_match"] == (predicted == gold)
            assert predicted == [trajectory["db_hashes"]["agent"], trajectory["db_hashes"]["user"]]  # replay = live

    def trajectory_of(unit: str) -> dict[str, Any]:
        return json.loads((run_dir / records[unit]["trajectory"]).read_text())

    invalid = trajectory_of("invalid_tools#0")
    errors = [m for m in invalid["messages"] if m["role"] == "tool"]
    assert len(errors) == 10 and invalid["steps"] == 21 and all(m["error"] for m in errors)
    assert all(m["content"] == "Error: Tool 'no_such_tool' not found." for m in errors)
    assert trajectory_of("endless_chat#0")["steps"] == 30
    parallel = trajectory_of("parallel_booking#0")["messages"]
    batch = next(m for m in parallel if m.get("tool_calls"))
    assert [c["name"] for c in batch["tool_calls"]] == ["find_member_by_email", "book_class"]
    after = parallel[parallel.index(batch) + 1: parallel.index(batch) + 3]
    assert [m["id"] for m in after] == [c["id"] for c in batch["tool_calls"]] and after[0]["content"] == "m101"
    assert trajectory_of("book_wrong_class#0")["reward_info"]["reward_breakdown"] == {"DB": 0.0, "COMMUNICATE": 1.0}
    assert trajectory_of("plan_fee_not_said#0")["reward_info"]["reward_breakdown"] == {"DB": 1.0, "COMMUNICATE": 0.0}
    assert trajectory_of("book_without_lookup#0")["reward_info"]["reward_breakdown"] == {"DB": 1.0, "ACTION": 0.0}
    assert trajectory_of("refund_nl_unmet#0")["reward_info"]["nl_assertions"][0]["met"] is False
    login = trajectory_of("app_login#0")["messages"]
    assert [c["requestor"] for m in login for c in m.get("tool_calls") or ()] == ["user", "user", "assistant"]

    events = read_jsonl(run_dir / "profile.jsonl")
    calls_by_role = Counter(e["role"] for e in events if e["type"] == "model_call" and e["status"] == "ok")
    assert calls_by_role["user"] == sum(r["user_calls"] for r in records.values())
    assert calls_by_role["orchestrator"] == sum(r["agent_calls"] for r in records.values())
    assert calls_by_role["judge"] == 2 * trials  # the two NL_ASSERTION tasks

    _check_export(tmp_path, run_dir, records)


def _check_export(tmp_path: Path, run_dir: Path, records: dict[str, dict[str, Any]]) -> None:
    out = tmp_path / "results.json"
    exported = run_ops(["export", str(run_dir), "--format", "tau2", "--out", str(out)])
    assert exported.returncode == 0, exported.stderr
    assert f"wrote {len(records)} simulation(s) of {len(EXPECTED)} task(s)" in exported.stdout
    again = run_ops(["export", str(run_dir), "--format", "tau2", "--out", str(out)])
    assert again.returncode == 2 and "--overwrite" in again.stderr
    results = json.loads(out.read_text())
    assert list(results) == ["timestamp", "info", "tasks", "simulations"]
    info = results["info"]
    assert (info["num_trials"], info["max_steps"], info["max_errors"], info["seed"]) == (4, 30, 10, 300)
    assert info["agent_info"]["llm"] == "sim/agent" and info["user_info"]["llm"] == "sim/user"
    assert info["agent_info"]["llm_args"] == info["user_info"]["llm_args"] == {"temperature": 0.0}
    assert info["environment_info"]["domain_name"] == "synthetic"
    assert info["environment_info"]["policy"].startswith("# Fitness club support policy")
    assert "book_class" in info["environment_info"]["tool_defs"]
    tasks_file = json.loads((REPO / "evals/tau2/data/domains/synthetic/tasks.json").read_text())
    assert results["tasks"] == tasks_file
    assert len(results["simulations"]) == len(records)
    for simulation in results["simulations"]:
        record = records[f"{simulation['task_id']}#{simulation['trial']}"]
        trajectory = json.loads((run_dir / record["trajectory"]).read_text())
        assert list(simulation) == ["id", "task_id", "timestamp", "start_time", "end_time", "duration",
                                    "termination_reason", "agent_cost", "user_cost", "reward_info", "messages",
                                    "trial", "seed"]
        assert (simulation["id"], simulation["seed"], simulation["termination_reason"], simulation["duration"]) == (
            trajectory["id"], record["seed"], record["termination_reason"], trajectory["duration"])
        assert simulation["reward_info"] == trajectory["reward_info"]
        assert simulation["reward_info"]["reward"] == record["reward"]
        assert len(simulation["messages"]) == len(trajectory["messages"])
        for exported_message, message in zip(simulation["messages"], trajectory["messages"], strict=True):
            assert exported_message["role"] == message["role"] and exported_message["content"] == message["content"]
            assert exported_message["turn_idx"] == message["turn_idx"]
            if message["role"] == "tool":
                assert set(exported_message) == {"id", "role", "content", "requestor", "error", "turn_idx",
                                                 "timestamp"}
                assert (exported_message["id"], exported_message["error"]) == (message["id"], message["error"])
            else:
                assert exported_message["tool_calls"] == ([
                    {"id": c["id"], "name": c["name"], "arguments": c["arguments"], "requestor": c["requestor"]}
                    for c in message["tool_calls"]] if message["tool_calls"] else None)


def test_kill_9_then_resume_runs_every_task_and_trial_once(tmp_path: Path, sims: Any) -> None:
    agent = SimServer("sim/agent", args=["--latency-ms", "40"], log_dir=tmp_path)
    with agent:
        home = tmp_path / "ops"
        topology = tau2_fleet(home, agent, sims[1], sims[2])
        run_dir = tmp_path / "run"
        env = {"OPS_HOME": str(home)}
        base = ["eval", "tau2", "--no-analyze", "--topology", str(topology), "--run-dir", str(run_dir),
                "--trials", "2", "--max-steps", "30", "--concurrency", "4"]
        kill9_mid_run(base, run_dir / "results.jsonl", 6, env=env, timeout_s=300)
        text = (run_dir / "results.jsonl").read_text()
        before = [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]
        units = [f"{t}#{k}" for t in EXPECTED for k in range(2)]
        assert 6 <= len(before) < len(units)
        resumed = run_ops([*base, "--resume"], env=env, timeout=600)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = read_jsonl(run_dir / "results.jsonl")
    assert Counter(r["id"] for r in after) == Counter(units)  # every (task, trial) exactly once
    assert after[: len(before)] == before
    for record in after:
        assert json.loads((run_dir / record["trajectory"]).read_text())["trial"] == record["trial"]
    scores = json.loads((run_dir / "scores.json").read_text())
    want = expected_scores(2)
    assert (scores["avg_reward"], scores["pass_hat_k"], scores["evaluated"]) == (
        want["avg_reward"], want["pass_hat_k"], len(units))


def test_toolorchestra_protocol_routes_call_expert_to_the_alias_roles(tmp_path: Path, sims: Any) -> None:
    agent, user, judge = sims
    home = tmp_path / "ops"
    expert = SimServer("sim/expert", args=["--latency-ms", "2"], log_dir=tmp_path)
    with expert:
        topology = write_fleet(home, {"agent": (agent, {}), "usersim": (user, {}), "judge": (judge, {}),
                                      "experts": (expert, {})},
                               {"orchestrator": "agent", "user": "usersim", "judge": "judge", "strong": "experts"},
                               aliases={"expert-1": "strong", "expert-2": "strong", "expert-3": "strong"},
                               name="tau2to")
        tasks = json.loads((REPO / "evals/tau2/data/domains/synthetic/tasks.json").read_text())
        by_id = {t["id"]: t for t in tasks}
        delegated = json.loads(json.dumps(by_id["book_pilates"]))
        delegated["id"] = "book_via_expert"
        instructions = delegated["user_scenario"]["instructions"]
        instructions["task_instructions"] = instructions["task_instructions"].replace(
            "[sim:call book_class", '[sim:call call_expert {"expert":"expert-3"}] [sim:call book_class')
        task_path = tmp_path / "tasks.json"
        task_path.write_text(json.dumps([delegated, by_id["ask_for_human"], by_id["invalid_tools"]]))
        run_dir = tmp_path / "run"
        _eval(["--topology", str(topology), "--run-dir", str(run_dir), "--task-file", str(task_path),
               "--protocol", "toolorchestra", "--max-errors", "4"], {"OPS_HOME": str(home)})
    assert "call_expert aliases: expert-1 -> strong, expert-2 -> strong, expert-3 -> strong" in \
        (run_dir / "eval.log").read_text()
    records = {r["task_id"]: r for r in read_jsonl(run_dir / "results.jsonl")}
    assert {t: (r["reward"], r["termination_reason"], r["expert_calls"]) for t, r in records.items()} == {
        "book_via_expert": (1.0, "user_stop", 1), "ask_for_human": (1.0, "user_stop", 0),
        "invalid_tools": (0.0, "too_many_errors", 0)}
    booked = json.loads((run_dir / records["book_via_expert"]["trajectory"]).read_text())["messages"]
    assert [(c["name"], m["raw_data"]["expert"]) for m in booked for c in m.get("tool_calls") or ()] == [
        ("find_member_by_email", None), ("book_class", "expert-3")]
    transfer = json.loads((run_dir / records["ask_for_human"]["trajectory"]).read_text())["messages"]
    assert [m["content"] for m in transfer if m["role"] == "tool"] == ["Transfer successful"]  # hidden, still run
    events = read_jsonl(run_dir / "profile.jsonl")
    assert Counter(e["role"] for e in events if e["type"] == "model_call")["strong"] == 1
    scores = json.loads((run_dir / "scores.json").read_text())
    assert (scores["avg_reward"], scores["pass_hat_k"]) == (round(2 / 3, 6), {"1": round(2 / 3, 6)})


def test_bad_input_fails_fast_naming_what_is_wrong(tmp_path: Path, sims: Any) -> None:
    home = tmp_path / "ops"
    topology = tau2_fleet(home, *sims)
    env = {"OPS_HOME": str(home)}
    bad_tasks = tmp_path / "tasks.json"
    bad_tasks.write_text(json.dumps([{"id": "x", "user_scenario": {"instructions": 3}}]))
    cases = [(["--domain", "banking"], "Invalid value for '--domain': 'banking' is not one of"),
             (["--data-dir", str(tmp_path / "none")], "no domains/synthetic/ folder"),
             (["--agent-args", "{temperature"], "--agent-args '{temperature': not valid JSON"),
             (["--task-file", str(bad_tasks)], f"{bad_tasks}: task 'x': \"user_scenario.instructions\" must be"),
             (["--task-split", "nope"], "split_tasks.json: no split 'nope' (splits: base, test, train)"),
             (["--user", "nobody"], "nobody")]
    for args, message in cases:
        result = run_ops(["eval", "tau2", "--no-analyze", "--topology", str(topology), "--run-dir",
                          str(tmp_path / "run"), *args], env=env, timeout=120)
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr and "Traceback" not in result.stderr, (args, result.stderr)
