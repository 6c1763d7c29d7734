"""`ops eval tau2 --domain telecom` over real sims: dual control end to end. The user simulator acts
on its own phone (user tools, `[sim:user_call …]`), the agent on the carrier's DB (`[sim:call …]`),
the sync carries the line's roaming to the phone, and the env assertions judge the phone at the end.

The tasks (our own small data dir, tests/tau2_telecom_data.py): Ann Lee (line L1, roaming not enabled
on the line) is abroad with roaming off on her phone. Mobile data works only when both sides act:
the agent's `enable_roaming` on L1 and the user's `toggle_roaming`. Rewards, written down from that:
both 1.0, agent only 0.0, user only 0.0, and the ACTION-gated task 0.0 when the agent's action is
missing even though the phone (fixed by the user alone on a line that already allows roaming) works."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_ops
from tests.integration.agent_fixtures import read_jsonl
from tests.integration.tau2_fixtures import tau2_fleet, tau2_sims
from tests.simserver import SimServer
from tests.tau2_telecom_data import write_telecom_data

ABROAD = [
    {"env_type": "user", "func_name": "set_user_info", "arguments": {"name": "Ann Lee", "phone_number": "555-0001"}},
    {"env_type": "user", "func_name": "set_user_location", "arguments": {"abroad": True}},
    {"env_type": "user", "func_name": "turn_roaming_off", "arguments": {}},
]
DATA_WORKS = [{"env_type": "user", "func_name": "assert_mobile_data_status", "arguments": {"expected_status": True},
               "assert_value": True}]
ENABLE = '[sim:call enable_roaming {"customer_id": "C1", "line_id": "L1"}]'
TOGGLE = "[sim:user_call toggle_roaming {}]"
CHECK = "[sim:user_call check_network_status {}]"
SAY = "[sim:say Roaming is now enabled on your line.]"


def _task(task_id: str, directives: str, *, line_roaming: bool = False, actions: list[dict[str, Any]] | None = None,
          basis: list[str] | None = None) -> dict[str, Any]:
    setup = list(ABROAD)
    if line_roaming:
        setup.append({"env_type": "assistant", "func_name": "enable_roaming",
                      "arguments": {"customer_id": "C1", "line_id": "L1"}})
    return {"id": task_id,
            "user_scenario": {"persona": None, "instructions": {
                "domain": "telecom", "reason_for_call": "Mobile data does not work abroad.",
                "known_info": "You are Ann Lee, phone number 555-0001.", "unknown_info": None,
                "task_instructions": f"Follow the agent's guidance. {directives}"}},
            "initial_state": {"initialization_data": None, "initialization_actions": setup, "message_history": None},
            "evaluation_criteria": {"actions": actions or [], "env_assertions": DATA_WORKS,
                                    "reward_basis": basis or ["ENV_ASSERTION"]}}


USER_TOGGLES = {"action_id": "toggle_roaming_0", "requestor": "user", "name": "toggle_roaming", "arguments": {},
                "compare_args": None}
AGENT_ENABLES = {"action_id": "enable_roaming_0", "requestor": "assistant", "name": "enable_roaming",
                 "arguments": {"customer_id": "C1", "line_id": "L1"}, "compare_args": ["customer_id", "line_id"]}
TASKS = [
    _task("both_sides", f"{CHECK} {TOGGLE} {ENABLE} {SAY}"),
    _task("agent_only", f"{ENABLE} {SAY}"),
    _task("user_only", TOGGLE),
    _task("action_missing", TOGGLE, line_roaming=True, actions=[USER_TOGGLES, AGENT_ENABLES],
          basis=["ENV_ASSERTION", "ACTION"]),
    _task("actions_met", f"{TOGGLE} {ENABLE}", line_roaming=True, actions=[USER_TOGGLES, AGENT_ENABLES],
          basis=["ENV_ASSERTION", "ACTION"]),
]
EXPECTED = {"both_sides": 1.0, "agent_only": 0.0, "user_only": 0.0, "action_missing": 0.0, "actions_met": 1.0}


@pytest.fixture(scope="module")
def sims(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimServer, SimServer, SimServer]]:
    with tau2_sims(tmp_path_factory.mktemp("tau2telecom")) as servers:
        yield servers


def test_dual_control_rewards_need_both_sides_and_the_export_keeps_user_tool_calls(tmp_path: Path,
                                                                                  sims: Any) -> None:
    home = tmp_path / "ops"
    topology = tau2_fleet(home, *sims)
    write_telecom_data(tmp_path / "data", TASKS)
    run_dir = tmp_path / "run"
    trials = 2
    result = run_ops(["eval", "tau2", "--no-analyze", "--topology", str(topology), "--run-dir", str(run_dir),
                      "--domain", "telecom", "--data-dir", str(tmp_path / "data"), "--trials", str(trials)],
                     env={"OPS_HOME": str(home)}, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]

    records = {r["id"]: r for r in read_jsonl(run_dir / "results.jsonl")}
    assert sorted(records) == sorted(f"{t}#{k}" for t in EXPECTED for k in range(trials))
    for record in records.values():
        assert (record["reward"], record["termination_reason"]) == (EXPECTED[record["task_id"]], "user_stop"), \
            record["id"]
    scores = json.loads((run_dir / "scores.json").read_text())
    n = len(EXPECTED) * trials
    avg = round(sum(EXPECTED.values()) * trials / n, 6)
    assert (scores["simulations"], scores["evaluated"], scores["avg_reward"]) == (n, n, avg)
    passed = sum(r == 1.0 for r in EXPECTED.values())
    assert scores["pass_hat_k"] == {"1": passed / len(EXPECTED), "2": passed / len(EXPECTED)}  # deterministic
    assert scores["by_domain"] == {"telecom": {"simulations": n, "avg_reward": avg}}

    both = records["both_sides#0"]
    trajectory = json.loads((run_dir / both["trajectory"]).read_text())
    user_calls = [c for m in trajectory["messages"] if m["role"] == "user" for c in m.get("tool_calls") or ()]
    assert [(c["name"], c["requestor"]) for c in user_calls] == [("check_network_status", "user"),
                                                                 ("toggle_roaming", "user")]
    user_results = [m for m in trajectory["messages"] if m["role"] == "tool" and m["requestor"] == "user"]
    assert [m["error"] for m in user_results] == [False, False]
    assert user_results[0]["content"] == (  # abroad, the phone's roaming off
        "Airplane Mode: OFF\nSIM Card Status: active\nCellular Connection: connected\nCellular Signal: excellent\n"
        "Cellular Network Type: 5G\nMobile Data Enabled: Yes\nData Roaming Enabled: No\nWi-Fi Radio: OFF\n"
        "Wi-Fi Connected: No")
    assert user_results[1]["content"] == ("Data Roaming is now ON.\n"
                                          "Status Bar: 📶⁴ Excellent | 5G | 📱 Data Enabled | 🔋 60%")
    agent_calls = [c for m in trajectory["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or ()]
    assert [(c["name"], c["arguments"]) for c in agent_calls] == [("enable_roaming",
                                                                   {"customer_id": "C1", "line_id": "L1"})]
    assert trajectory["reward_info"]["reward_breakdown"] == {"ENV_ASSERTION": 1.0}

    def reward_info(record_id: str) -> dict[str, Any]:
        info: dict[str, Any] = json.loads((run_dir / records[record_id]["trajectory"]).read_text())["reward_info"]
        return info

    missing = reward_info("action_missing#0")  # the phone works, the agent's action is missing
    assert [c["action_match"] for c in missing["action_checks"]] == [True, False]
    assert [c["met"] for c in missing["env_assertions"]] == [True]
    assert missing["reward_breakdown"] == {"ENV_ASSERTION": 1.0, "ACTION": 0.0}
    for lonely in ("agent_only#0", "user_only#0"):  # one side alone: the line or the phone still blocks data
        assert [c["met"] for c in reward_info(lonely)["env_assertions"]] == [False]

    out = tmp_path / "tau2.json"
    exported = run_ops(["export", str(run_dir), "--format", "tau2", "--out", str(out)], env={"OPS_HOME": str(home)})
    assert exported.returncode == 0, exported.stderr
    results = json.loads(out.read_text())
    assert results["info"]["environment_info"]["domain_name"] == "telecom"
    sims_by_task = {(s["task_id"], s["trial"]): s for s in results["simulations"]}
    exported_both = sims_by_task[("both_sides", 0)]
    assert exported_both["reward_info"]["reward"] == 1.0
    assert [c["requestor"] for m in exported_both["messages"] if m["role"] == "user"
            for c in m.get("tool_calls") or ()] == ["user", "user"]
