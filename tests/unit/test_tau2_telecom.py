"""The telecom domain on τ²-bench's data shape (a small db.toml and user_db.toml written here): the
data models' dumps, each write tool's exact changes (computed by hand from τ²-bench's rules), refused
calls that change nothing, the sync between the carrier's DB and the phone, and the reward of a
dual-control task (initialization actions on both sides, env assertions, actions)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from orchestra_ops.evals.tau2 import telecom
from orchestra_ops.evals.tau2.domain import Env
from orchestra_ops.evals.tau2.environment import base_env, fresh_env, get_domain
from orchestra_ops.evals.tau2.reward import evaluate
from orchestra_ops.evals.tau2.tasks import DomainData, load_domain_data

from tests.tau2_telecom_data import write_telecom_data

LINE_L2 = {"line_id": "L2", "phone_number": "555-0002", "status": "Suspended", "plan_id": "P2", "device_id": None,
           "data_used_gb": 0.0, "data_refueling_gb": 0.0, "roaming_enabled": True, "contract_end_date": None,
           "last_plan_change_date": None, "last_sim_replacement_date": None, "suspension_start_date": "2025-02-01"}
CUSTOMER_C2 = {"customer_id": "C2", "full_name": "Bo Park", "date_of_birth": "1985-05-06", "email": "bo@example.com",
               "phone_number": "555-0003",
               "address": {"street": "2 Oak Ave", "city": "Denver", "state": "CO", "zip_code": "80203"},
               "account_status": "Pending Verification", "payment_methods": [], "line_ids": ["L3"],
               "bill_ids": ["B3"], "created_at": "2025-01-01", "last_extension_date": None,
               "goodwill_credit_used_this_year": 0.0}
PHONE = {"sim_card_status": "active", "sim_card_missing": False, "airplane_mode": False,
         "network_signal_strength": "good", "network_technology_connected": "5G",
         "network_connection_status": "connected", "battery_level": 60, "data_enabled": True,
         "roaming_enabled": False, "network_mode_preference": "4g_5g_preferred",
         "active_apn_settings": {"apn_name": "internet", "reset_at_reboot": False, "mms_apn": "mms",
                                 "mmsc_url": "http://mms.carrier.com/mms/wapenc", "mms_proxy": None, "mms_port": None},
         "wifi_enabled": False, "wifi_connected": False, "wifi_ssid": None, "wifi_signal_strength": "none",
         "wifi_calling_enabled": False, "wifi_calling_mms_over_wifi": False, "data_saver_mode": False,
         "vpn_enabled_setting": False, "vpn_connected": False, "vpn_details": None,
         "app_statuses": {"messaging": {"app_name": "messaging", "permissions": {
             "sms": True, "storage": True, "phone": False, "network": False}}}}
SURROUNDINGS = {"name": None, "phone_number": None, "is_abroad": False, "roaming_allowed": False,
                "signal_strength": {"2G": "poor", "3G": "fair", "4G": "good", "5G": "excellent"},
                "mobile_data_usage_exceeded": False, "line_active": True, "payment_request": None}
ON_LINE_L1 = [{"env_type": "user", "func_name": "set_user_info", "arguments": {"name": "Ann Lee",
                                                                               "phone_number": "555-0001"}}]


def _data(tmp_path: Path, tasks: list[dict[str, Any]] | None = None) -> DomainData:
    return load_domain_data(write_telecom_data(tmp_path, tasks or []), "telecom")


def _env(tmp_path: Path, actions: list[dict[str, Any]] | None = None) -> Env:
    task = {"id": "t", "user_scenario": {"instructions": "x"}, "initial_state": {"initialization_actions": actions}}
    return fresh_env(get_domain("telecom"), _data(tmp_path), task)


def test_the_dumps_fill_every_field_as_the_data_models_do(tmp_path: Path) -> None:
    env = base_env(get_domain("telecom"), _data(tmp_path))
    assert env.db["plans"][0] == {"plan_id": "P1", "name": "Basic", "data_limit_gb": 5.0, "price_per_month": 40.0,
                                  "data_refueling_price_per_gb": 5.0}
    assert env.db["devices"] == [{"device_id": "D1", "device_type": "phone", "model": "Phone X", "imei": None,
                                  "is_esim_capable": True, "activated": False,
                                  "activation_date": "2025-01-20 14:30:00", "last_esim_transfer_date": None}]
    assert env.db["lines"][1] == LINE_L2 and env.db["lines"][2]["data_used_gb"] == 1.0
    assert env.db["customers"][1] == CUSTOMER_C2
    assert env.db["customers"][0]["created_at"] == "2025-01-15 10:30:00"
    assert env.db["bills"][0]["line_items"] == [{"description": "Basic plan", "amount": 40.0, "date": "2025-02-01",
                                                 "item_type": "Plan Charge"}]
    assert env.user_db == {"device": PHONE, "surroundings": SURROUNDINGS}


def test_write_tools_change_exactly_what_tau2_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _env(tmp_path)
    before = copy.deepcopy(env.db)
    assert env.call("suspend_line", {"customer_id": "C1", "line_id": "L1", "reason": "travel"})[1] is False
    assert env.call("resume_line", {"customer_id": "C1", "line_id": "L2"})[0].startswith(
        '{"message": "Line resumed successfully", "line": {"line_id": "L2", "phone_number": "555-0002", '
        '"status": "Active", "plan_id": "P2", "device_id": null, "data_used_gb": 0.0,')
    assert env.call("disable_roaming", {"customer_id": "C1", "line_id": "L2"}) == ("Roaming disabled successfully",
                                                                                   False)
    assert env.call("send_payment_request", {"customer_id": "C1", "bill_id": "B1"}) == (
        "Payment request sent to the customer for bill B1", False)
    assert env.call("refuel_data", {"customer_id": "C1", "line_id": "L1", "gb_amount": 2}) == (
        '{"message": "Successfully added 2 GB of data for line L1 for $10.00", "new_data_refueling_gb": "2.0", '
        '"charge": "10.0"}', False)
    monkeypatch.setattr(telecom, "new_bill_id", lambda: "Bnew0001")
    assert env.call("refuel_data", {"customer_id": "C2", "line_id": "L3", "gb_amount": 1.5})[1] is False
    expected = copy.deepcopy(before)
    lines = {line["line_id"]: line for line in expected["lines"]}
    lines["L1"].update(status="Suspended", suspension_start_date="2025-02-25", data_refueling_gb=2.0)
    lines["L2"].update(status="Active", suspension_start_date=None, roaming_enabled=False)
    lines["L3"]["data_refueling_gb"] = 1.5
    expected["bills"][0]["status"] = "Awaiting Payment"
    expected["bills"][1].update(total_due=10.0, line_items=[
        {"description": "Data refueling: 2 GB at $5.0/GB", "amount": 10.0, "date": "2025-02-25",
         "item_type": "Charge"}])
    expected["bills"].append({"bill_id": "Bnew0001", "customer_id": "C2", "period_start": "2025-03-01",
                              "period_end": "2025-03-31", "issue_date": "2025-03-01", "total_due": 3.0,
                              "due_date": "2025-03-15", "status": "Draft", "line_items": [
                                  {"description": "Data refueling: 1.5 GB at $2.0/GB", "amount": 3.0,
                                   "date": "2025-02-25", "item_type": "Charge"}]})
    expected["customers"][1]["bill_ids"].append("Bnew0001")
    assert env.db == expected


def test_refused_calls_answer_an_error_and_change_nothing(tmp_path: Path) -> None:
    env = _env(tmp_path, ON_LINE_L1)
    hashes = env.hashes()
    refusals = [
        ("suspend_line", {"customer_id": "C1", "line_id": "L2", "reason": "x"}, "Line must be active to suspend"),
        ("resume_line", {"customer_id": "C1", "line_id": "L1"}, "Line must be suspended to resume"),
        ("suspend_line", {"customer_id": "C1", "line_id": "L3", "reason": "x"}, "Line L3 not found for customer C1"),
        ("enable_roaming", {"customer_id": "C9", "line_id": "L1"}, "Customer with ID C9 not found"),
        ("send_payment_request", {"customer_id": "C1", "bill_id": "B3"}, "Bill B3 not found for customer C1"),
        ("refuel_data", {"customer_id": "C1", "line_id": "L1", "gb_amount": 0}, "Refuel amount must be positive"),
        ("get_details_by_id", {"id": "X1"}, "Unknown ID format or type: X1"),
        ("get_customer_by_phone", {"phone_number": "555-7777"}, "Customer with phone number 555-7777 not found"),
    ]
    for name, arguments, message in refusals:
        assert env.call(name, arguments) == (f"Error: {message}", True), name
    assert env.call("make_payment", {}, "user") == ("You do not have a payment request.", False)
    assert env.hashes() == hashes
    assert env.call("toggle_airplane_mode", {}, "user")[1] is False
    assert env.call("toggle_wifi", {}, "user") == (
        "Cannot change Wi-Fi settings while Airplane Mode is ON.\nStatus Bar: ✈️ Airplane Mode | 🔋 60%", False)
    assert env.call("toggle_airplane_mode", {}, "user") == (
        "Airplane Mode is now OFF.\nStatus Bar: 📶⁴ Excellent | 5G | 📱 Data Enabled | 🔋 60%", False)
    assert env.user_db is not None  # the phone's own refusal left Wi-Fi off; the search found 5G at full strength
    assert (env.user_db["device"]["wifi_enabled"], env.user_db["device"]["network_signal_strength"]) == (
        False, "excellent")


def test_the_sync_brings_the_phone_in_step_with_the_carrier(tmp_path: Path) -> None:
    env = _env(tmp_path, [*ON_LINE_L1, {"env_type": "assistant", "func_name": "set_data_usage",
                                        "arguments": {"customer_id": "C1", "line_id": "L1", "data_used_gb": 5.0}}])
    assert env.user_db is not None
    around = env.user_db["surroundings"]
    assert (around["line_active"], around["roaming_allowed"], around["mobile_data_usage_exceeded"]) == (
        True, False, True)  # 5.0 used >= 5.0 limit + 0 refuelled
    assert env.call("run_speed_test", {}, "user") == ("Speed test failed: No Connection.", False)
    env.call("refuel_data", {"customer_id": "C1", "line_id": "L1", "gb_amount": 1})
    env.call("enable_roaming", {"customer_id": "C1", "line_id": "L1"})
    assert (around["roaming_allowed"], around["mobile_data_usage_exceeded"]) == (True, False)
    env.call("send_payment_request", {"customer_id": "C1", "bill_id": "B1"})
    assert around["payment_request"] == {"bill_id": "B1", "amount_due": 40.0, "paid": False}
    assert env.call("make_payment", {}, "user") == ("Payment of 40.0 USD has been made for bill B1.", False)
    assert around["payment_request"] is None and env.db["bills"][0]["status"] == "Paid"
    env.call("suspend_line", {"customer_id": "C1", "line_id": "L1", "reason": "x"})
    assert around["line_active"] is False and env.user_db["device"]["network_connection_status"] == "connected"
    assert env.call("reboot_device", {}, "user") == (
        "Restarting network services...\nStatus Bar: 📵 No Signal | 📵 Data Disabled | 🔋 60%", False)
    assert env.user_db["device"]["network_connection_status"] == "no_service"


ROAMING_TASK = {
    "id": "[mobile_data_issue]roaming",
    "user_scenario": {"instructions": "Your data does not work abroad."},
    "initial_state": {"initialization_data": None, "initialization_actions": [
        *ON_LINE_L1,
        {"env_type": "user", "func_name": "set_user_location", "arguments": {"abroad": True}},
        {"env_type": "user", "func_name": "turn_roaming_off", "arguments": {}},
        {"env_type": "user", "func_name": "turn_data_saver_mode_on", "arguments": {}}]},
    "evaluation_criteria": {
        "actions": [
            {"action_id": "a0", "requestor": "assistant", "name": "enable_roaming",
             "arguments": {"customer_id": "C1", "line_id": "L1"}},
            {"action_id": "a1", "requestor": "user", "name": "toggle_roaming", "arguments": {}},
            {"action_id": "a2", "requestor": "user", "name": "toggle_data_saver_mode", "arguments": {}}],
        "env_assertions": [
            {"env_type": "user", "func_name": "assert_mobile_data_status", "arguments": {"expected_status": True}},
            {"env_type": "user", "func_name": "assert_internet_speed",
             "arguments": {"expected_speed": 200, "expected_desc": "excellent"}}],
        "reward_basis": ["ENV_ASSERTION", "ACTION"]}}


def _trajectory(*calls: tuple[str, str, dict[str, Any]]) -> list[dict[str, Any]]:
    messages = [{"role": requestor, "content": None,
                 "tool_calls": [{"id": str(i), "name": name, "arguments": arguments, "requestor": requestor}]}
                for i, (requestor, name, arguments) in enumerate(calls)]
    return [*messages, {"role": "user", "content": "###STOP###", "tool_calls": None}]


def test_gold_replay_scores_one_and_a_missing_user_action_scores_zero(tmp_path: Path) -> None:
    data, domain = _data(tmp_path, [ROAMING_TASK]), get_domain("telecom")
    start = fresh_env(domain, data, ROAMING_TASK)
    assert start.call("run_speed_test", {}, "user") == ("Speed test failed: No Connection.", False)
    gold = [(a["requestor"], a["name"], a["arguments"]) for a in ROAMING_TASK["evaluation_criteria"]["actions"]]
    info = evaluate(ROAMING_TASK, _trajectory(("assistant", "get_customer_by_phone", {"phone_number": "555-0001"}),
                                              *gold), "user_stop", lambda: fresh_env(domain, data, ROAMING_TASK), None)
    assert info["reward"] == 1.0 and info["reward_breakdown"] == {"ENV_ASSERTION": 1.0, "ACTION": 1.0}
    # τ²-bench's gold env runs the gold actions without a sync: the phone there never learns roaming is allowed
    assert info["db_check"]["db_match"] is False
    no_toggle = _trajectory(gold[0], gold[2])
    info = evaluate(ROAMING_TASK, no_toggle, "user_stop", lambda: fresh_env(domain, data, ROAMING_TASK), None)
    assert info["reward"] == 0.0 and info["reward_breakdown"] == {"ENV_ASSERTION": 0.0, "ACTION": 0.0}
    assert [(c["env_assertion"]["func_name"], c["met"]) for c in info["env_assertions"]] == [
        ("assert_mobile_data_status", False), ("assert_internet_speed", False)]
    assert [c["action"]["name"] for c in info["action_checks"] if not c["action_match"]] == ["toggle_roaming"]
    saver_on = _trajectory(gold[0], gold[1])  # data works, but at a fifth of the speed: 55.0 Mbps, "Good"
    info = evaluate(ROAMING_TASK, saver_on, "user_stop", lambda: fresh_env(domain, data, ROAMING_TASK), None)
    assert [(c["env_assertion"]["func_name"], c["met"]) for c in info["env_assertions"]] == [
        ("assert_mobile_data_status", True), ("assert_internet_speed", False)]


def test_db_hash_replay_agrees_where_tau2_agrees(tmp_path: Path) -> None:
    task = {"id": "apn", "user_scenario": {"instructions": "No service."},
            "initial_state": {"initialization_actions": [
                *ON_LINE_L1, {"env_type": "user", "func_name": "break_apn_settings", "arguments": {}}]},
            "evaluation_criteria": {
                "actions": [{"action_id": "0", "requestor": "user", "name": "reset_apn_settings", "arguments": {}},
                            {"action_id": "1", "requestor": "user", "name": "reboot_device", "arguments": {}}],
                "env_assertions": [{"env_type": "user", "func_name": "assert_service_status",
                                    "arguments": {"expected_status": "connected"}}],
                "reward_basis": ["DB", "ENV_ASSERTION"]}}
    data, domain = _data(tmp_path, [task]), get_domain("telecom")
    assert fresh_env(domain, data, task).call("check_network_status", {}, "user")[0].splitlines()[2:4] == [
        "Cellular Connection: no_service", "Cellular Signal: none"]
    right = _trajectory(("user", "reset_apn_settings", {}), ("user", "check_apn_settings", {}),
                        ("user", "reboot_device", {}))
    info = evaluate(task, right, "user_stop", lambda: fresh_env(domain, data, task), None)
    assert info["reward"] == 1.0 and info["db_check"]["db_match"] is True
    reboot_only = _trajectory(("user", "reboot_device", {}))
    info = evaluate(task, reboot_only, "user_stop", lambda: fresh_env(domain, data, task), None)
    assert info["reward_breakdown"] == {"DB": 0.0, "ENV_ASSERTION": 0.0}


def test_each_initialization_action_is_followed_by_the_sync(tmp_path: Path) -> None:
    """The overdue-bill scenario: the line is suspended on the carrier's side, then the phone searches
    for a network; it finds none only because the sync ran between the two actions."""
    env = _env(tmp_path, [*ON_LINE_L1,
                          {"env_type": "assistant", "func_name": "suspend_line_for_overdue_bill",
                           "arguments": {"customer_id": "C1", "line_id": "L1", "new_bill_id": "B9",
                                         "contract_ended": True}},
                          {"env_type": "user", "func_name": "simulate_network_search", "arguments": {}}])
    assert env.user_db is not None and env.user_db["device"]["network_connection_status"] == "no_service"
    assert env.db["bills"][-1] == {
        "bill_id": "B9", "customer_id": "C1", "period_start": "2025-01-01", "period_end": "2025-01-31",
        "issue_date": "2025-01-01", "total_due": 40.0, "due_date": "2025-01-15", "status": "Overdue",
        "line_items": [{"description": "Charge for line L1", "amount": 40.0, "date": "2025-02-25",
                        "item_type": "Charge"}]}
    assert env.db["lines"][0]["contract_end_date"] == "2025-01-31" and env.db["customers"][0]["bill_ids"][-1] == "B9"
    checks = [("assert_overdue_bill_exists", {"customer_id": "C1", "overdue_bill_id": "B9"}, True),
              ("assert_no_overdue_bill", {"overdue_bill_id": "B9"}, False),
              ("assert_line_status", {"customer_id": "C1", "line_id": "L1", "expected_status": "Suspended"}, True)]
    assert [env.run_function("assistant", name, args) for name, args, _ in checks] == [c[2] for c in checks]
    env.call("send_payment_request", {"customer_id": "C1", "bill_id": "B9"})
    env.call("make_payment", {}, "user")
    env.call("resume_line", {"customer_id": "C1", "line_id": "L1"})
    env.call("reboot_device", {}, "user")
    assert env.run_function("assistant", "assert_no_overdue_bill", {"overdue_bill_id": "B9"}) is True
    assert env.run_function("user", "assert_service_status", {"expected_status": "connected"}) is True
