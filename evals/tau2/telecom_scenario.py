"""τ²-bench's `telecom` domain put together: the user-side env functions tasks use (initialization
actions that set the scene or break the phone, and the assertions on it), the sync between the
carrier's DB and the phone (τ²-bench's `sync_tools`), and the `TELECOM` domain.

The sync runs where τ²-bench runs it: when the environment is built, after every initialization
action, after every tool call that did not raise (`Env.call`) and at the end of the initial state
(`fresh_env`); never between gold actions (τ²-bench's evaluator replays them without it). It is
idempotent, so τ²-bench's extra syncs (after each orchestrator step, after each assertion) change
nothing. It copies, for the user's phone number: the line's status (line_active), its roaming
(roaming_allowed), whether the data used reached the plan's limit plus refuels
(mobile_data_usage_exceeded); a paid payment request marks its bill Paid and is cleared; with no
request pending, the customer's first bill awaiting payment becomes the phone's payment request.
"""

from __future__ import annotations

from typing import Any

from orchestra_ops.evals.tau2 import telecom
from orchestra_ops.evals.tau2.domain import Domain, Env, ToolError
from orchestra_ops.evals.tau2.telecom_device import _flip, _toggle_airplane, connect_vpn, user
from orchestra_ops.evals.tau2.telecom_phone import (
    NETWORK_STATUSES,
    can_send_mms,
    mobile_data_working,
    network_search,
    normalize_user,
    speed_test,
)

# --- initialization actions (env_type "user") -----------------------------------------------------

@user.function
def set_user_info(db: dict[str, Any], name: str, phone_number: str) -> None:
    db["surroundings"].update(name=name, phone_number=phone_number)


@user.function
def set_user_location(db: dict[str, Any], abroad: bool) -> None:
    db["surroundings"]["is_abroad"] = abroad


@user.function
def simulate_network_search(db: dict[str, Any]) -> None:
    network_search(db)


@user.function
def turn_airplane_mode_on(db: dict[str, Any]) -> str:
    if not _toggle_airplane(db):
        _toggle_airplane(db)
    return "Airplane Mode is now ON."


@user.function
def turn_airplane_mode_off(db: dict[str, Any]) -> str:
    if _toggle_airplane(db):
        _toggle_airplane(db)
    return "Airplane Mode is now OFF."


@user.function
def unseat_sim_card(db: dict[str, Any]) -> str:
    db["device"]["sim_card_missing"] = True
    network_search(db)
    return "SIM card un-seated successfully."


@user.function
def lock_sim_card(db: dict[str, Any], mode: str) -> str:
    if mode in ("pin", "puk"):
        db["device"]["sim_card_status"] = f"locked_{mode}"
    network_search(db)
    return f"SIM card locked successfully in {mode} mode."


@user.function
def turn_data_on(db: dict[str, Any]) -> str:
    db["device"]["data_enabled"] = True  # no network search, as in τ²-bench
    return "Data connection restored."


@user.function
def turn_data_off(db: dict[str, Any]) -> str:
    if _flip(db, "data_enabled"):
        _flip(db, "data_enabled")
    return "Data connection broken."


def _turn(db: dict[str, Any], setting: str, on: bool, search: bool) -> None:
    if _flip(db, setting, search) != on:
        _flip(db, setting, search)


@user.function
def turn_roaming_on(db: dict[str, Any]) -> str:
    _turn(db, "roaming_enabled", True, search=True)
    return "Data Roaming is now ON."


@user.function
def turn_roaming_off(db: dict[str, Any]) -> str:
    _turn(db, "roaming_enabled", False, search=True)
    return "Data Roaming is now OFF."


@user.function
def turn_data_saver_mode_on(db: dict[str, Any]) -> str:
    _turn(db, "data_saver_mode", True, search=False)
    return "Data Saver Mode is now ON."


@user.function
def turn_data_saver_mode_off(db: dict[str, Any]) -> str:
    _turn(db, "data_saver_mode", False, search=False)
    return "Data Saver Mode is now OFF."


@user.function
def break_apn_settings(db: dict[str, Any]) -> str:
    db["device"]["active_apn_settings"]["apn_name"] = "broken"
    network_search(db)
    return "APN settings broken. Please call reset_apn_settings() to fix."


@user.function
def break_apn_mms_setting(db: dict[str, Any]) -> str:
    db["device"]["active_apn_settings"]["mmsc_url"] = None
    return "APN MMS setting broken. Please call reset_apn_settings() to fix."


@user.function
def set_wifi_calling(db: dict[str, Any], enabled: bool, mms_over_wifi: bool | None = None) -> str:
    if db["device"]["wifi_calling_enabled"] != enabled:
        _flip(db, "wifi_calling_enabled", search=False)
    message = f"Wi-Fi Calling is now {'ON' if enabled else 'OFF'}."
    if mms_over_wifi is not None:
        db["device"]["wifi_calling_mms_over_wifi"] = mms_over_wifi
        message += f"\nMMS over Wi-Fi is now {'ON' if mms_over_wifi else 'OFF'}."
    return message


@user.function
def break_vpn(db: dict[str, Any]) -> str:
    connect_vpn(db)
    if db["device"]["vpn_details"] is None:
        raise ToolError("'NoneType' object has no attribute 'server_performance'")
    db["device"]["vpn_details"]["server_performance"] = "poor"
    return "VPN connection broken."


@user.function
def remove_app_permission(db: dict[str, Any], app_name: str, permission: str) -> tuple[bool, str]:
    app = db["device"]["app_statuses"].get(app_name)
    permission = permission.lower()
    if app is None:
        return False, f"App '{app_name}' not found. Cannot remove permission."
    if permission not in app["permissions"]:
        return False, f"Permission '{permission}' not tracked for app '{app_name}'."
    app["permissions"][permission] = False
    return True, f"Permission '{permission}' removed from app '{app_name}'."


# --- assertions (env_type "user") -----------------------------------------------------------------

@user.function
def assert_airplane_mode_status(db: dict[str, Any], expected_status: bool) -> bool:
    return bool(db["device"]["airplane_mode"] == expected_status)


@user.function
def assert_service_status(db: dict[str, Any], expected_status: str) -> bool:
    if expected_status not in NETWORK_STATUSES:
        raise ToolError(f"'{expected_status}' is not a valid NetworkStatus")
    return bool(db["device"]["network_connection_status"] == expected_status)


@user.function
def assert_mobile_data_status(db: dict[str, Any], expected_status: bool) -> bool:
    return mobile_data_working(db) == expected_status


@user.function
def assert_mobile_roaming_status(db: dict[str, Any], expected_status: bool) -> bool:
    return bool(db["device"]["roaming_enabled"] == expected_status)


@user.function
def assert_mobile_data_saver_mode_status(db: dict[str, Any], expected_status: bool) -> bool:
    return bool(db["device"]["data_saver_mode"] == expected_status)


@user.function
def assert_internet_speed(db: dict[str, Any], expected_speed: float, expected_desc: str | None = None) -> bool:
    speed, desc = speed_test(db)
    reached = (speed or 0.0) >= expected_speed
    return reached if expected_desc is None else reached and desc.lower() == expected_desc.lower()


@user.function
def assert_internet_not_excellent(db: dict[str, Any]) -> bool:
    return speed_test(db)[1].lower() != "excellent"


@user.function
def assert_can_send_mms(db: dict[str, Any], expected_status: bool) -> bool:
    return can_send_mms(db) == expected_status


@user.function
def assert_mobile_data_usage_exceeded(db: dict[str, Any], expected_status: bool) -> bool:
    return bool(db["surroundings"]["mobile_data_usage_exceeded"] == expected_status)


# --- the sync ------------------------------------------------------------------------------------

def sync(env: Env) -> None:
    """The phone brought in step with the carrier's DB, and a payment made on it with the bill."""
    if env.user_db is None:
        return
    around: dict[str, Any] = env.user_db["surroundings"]
    phone = around["phone_number"]
    if phone is None:
        return
    line = telecom.line_by_phone(env.db, phone)
    around["line_active"] = line["status"] == "Active"
    around["roaming_allowed"] = bool(line["roaming_enabled"])
    plan = telecom.plan_by_id(env.db, line["plan_id"])
    around["mobile_data_usage_exceeded"] = line["data_used_gb"] >= plan["data_limit_gb"] + line["data_refueling_gb"]
    request = around["payment_request"]
    if request is not None and request["paid"]:
        telecom.set_bill_paid(env.db, request["bill_id"])
        around["payment_request"] = None
    if around["payment_request"] is None:
        customer = telecom.customer_by_phone(env.db, phone)
        awaiting = telecom.bills_awaiting_payment(env.db, customer)
        if awaiting:
            around["payment_request"] = {"bill_id": awaiting[0]["bill_id"],
                                         "amount_due": float(awaiting[0]["total_due"]), "paid": False}


TELECOM = Domain("telecom", telecom.agent, user, normalize_db=telecom.normalize, normalize_user_db=normalize_user,
                 default_user_db={}, sync=sync)
