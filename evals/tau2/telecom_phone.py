"""The telecom user's phone and surroundings (τ²-bench's `TelecomUserDB`), as a plain dict, and how
the phone behaves: the network search, the status bar, whether mobile data works, the speed test,
whether MMS can be sent. The user's tools and env functions built on these are in `telecom_device`.

User DB: `device` (the phone's settings and radio state: every field of τ²-bench's
MockPhoneAttributes, enums as their values) and `surroundings` (who and where the user is, what the
carrier's side says about the line: kept in step by the sync, and the pending payment request).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from orchestra_ops.evals.tau2.domain import ToolError

SIM_STATUSES = ("active", "missing", "locked_pin", "locked_puk")
TECHNOLOGIES = ("none", "2G", "3G", "4G", "5G")
MODE_PREFERENCES = ("4g_5g_preferred", "4g_only", "3g_only", "2g_only")
SIGNALS = ("none", "poor", "fair", "good", "excellent")
PERFORMANCES = ("unknown", "poor", "fair", "good", "excellent")
NETWORK_STATUSES = ("connected", "searching", "no_service", "emergency_only")
APN_NAMES = ("internet", "broken")
PERMISSIONS = ("sms", "storage", "phone", "network")


def _choice(values: tuple[str, ...]) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if value not in values:
            raise ToolError(f"Input should be {' or '.join(repr(v) for v in values)}, got {value!r}")
        return str(value)
    return check


_TRUE, _FALSE = ("1", "on", "t", "true", "y", "yes"), ("0", "f", "false", "n", "no", "off")


def lax_bool(value: Any) -> bool:
    """A bool as pydantic's lax mode reads one (true/false, 0/1, yes/no, on/off ...)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise ToolError(f"Input should be a valid boolean, got {value!r}")


def lax_int(value: Any) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value.strip())
    raise ToolError(f"Input should be a valid integer, got {value!r}")


def strict_str(value: Any) -> str:
    if not isinstance(value, str):
        raise ToolError(f"Input should be a valid string, got {value!r}")
    return value


def _opt(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """An Optional field: null allowed, anything else converted."""
    return lambda value: None if value is None else convert(value)


def _model(obj: Any, kind: str, spec: Mapping[str, tuple[Callable[[Any], Any], Any]]) -> dict[str, Any]:
    """`obj` validated as the model `spec` (defaults filled, unknown fields refused)."""
    if not isinstance(obj, Mapping):
        raise ToolError(f"{kind}: expected an object, got {obj!r}")
    unknown = [k for k in obj if k not in spec]
    if unknown:
        raise ToolError(f"{kind}: unknown field(s) {', '.join(map(str, unknown))}")
    out: dict[str, Any] = {}
    for name, (convert, default) in spec.items():
        if name not in obj:
            if default is ...:
                raise ToolError(f"{kind}: missing field {name}")
            out[name] = default() if callable(default) else default
        else:
            out[name] = convert(obj[name])
    return out


_optional_str = _opt(strict_str)
APN = {"apn_name": (_choice(APN_NAMES), "internet"), "reset_at_reboot": (lax_bool, False),
       "mms_apn": (_optional_str, "mms"), "mmsc_url": (_optional_str, "http://mms.carrier.com/mms/wapenc"),
       "mms_proxy": (_optional_str, None), "mms_port": (_opt(lax_int), None)}
VPN = {"server_address": (_optional_str, None), "protocol": (_optional_str, None),
       "server_performance": (_choice(PERFORMANCES), "unknown")}


def validate_apn_settings(obj: Any) -> dict[str, Any]:
    """APN settings validated as τ²-bench's APNSettings (the defaults: a working carrier APN)."""
    return _model(obj, "apn_settings", APN)


def _permissions(obj: Any) -> dict[str, Any]:
    return _model(obj, "permissions", {p: (lax_bool, False) for p in PERMISSIONS})


def _app(obj: Any) -> dict[str, Any]:
    return _model(obj, "app status", {"app_name": (strict_str, ...),
                                      "permissions": (_permissions, lambda: _permissions({}))})


def _apps(obj: Any) -> dict[str, Any]:
    return {str(name): _app(app) for name, app in obj.items()}


def default_apps() -> dict[str, Any]:
    return {"messaging": _app({"app_name": "messaging", "permissions": {"sms": True, "storage": True, "phone": True}}),
            "browser": _app({"app_name": "browser", "permissions": {"network": True, "storage": True}})}


DEVICE = {
    "sim_card_status": (_choice(SIM_STATUSES), "active"), "sim_card_missing": (lax_bool, False),
    "airplane_mode": (lax_bool, False), "network_signal_strength": (_choice(SIGNALS), "good"),
    "network_technology_connected": (_choice(TECHNOLOGIES), "5G"),
    "network_connection_status": (_choice(NETWORK_STATUSES), "connected"), "battery_level": (lax_int, 80),
    "data_enabled": (lax_bool, True), "roaming_enabled": (lax_bool, False),
    "network_mode_preference": (_choice(MODE_PREFERENCES), "4g_5g_preferred"),
    "active_apn_settings": (validate_apn_settings, lambda: validate_apn_settings({})),
    "wifi_enabled": (lax_bool, False),
    "wifi_connected": (lax_bool, False), "wifi_ssid": (_optional_str, None),
    "wifi_signal_strength": (_choice(SIGNALS), "none"), "wifi_calling_enabled": (lax_bool, False),
    "wifi_calling_mms_over_wifi": (lax_bool, False), "data_saver_mode": (lax_bool, False),
    "vpn_enabled_setting": (lax_bool, False), "vpn_connected": (lax_bool, False),
    "vpn_details": (_opt(lambda v: _model(v, "vpn_details", VPN)), None), "app_statuses": (_apps, default_apps)}
DEFAULT_SIGNALS = {"2G": "poor", "3G": "fair", "4G": "good", "5G": "excellent"}


def _signals(obj: Any) -> dict[str, str]:
    return {_choice(TECHNOLOGIES)(k): _choice(SIGNALS)(v) for k, v in obj.items()}


def _payment_request(obj: Any) -> dict[str, Any]:
    return _model(obj, "payment_request", {"bill_id": (strict_str, ...), "amount_due": (float, ...),
                                            "paid": (lax_bool, False)})


SURROUNDINGS = {"name": (_optional_str, None), "phone_number": (_optional_str, None), "is_abroad": (lax_bool, False),
                "roaming_allowed": (lax_bool, False), "signal_strength": (_signals, lambda: dict(DEFAULT_SIGNALS)),
                "mobile_data_usage_exceeded": (lax_bool, False), "line_active": (lax_bool, True),
                "payment_request": (_opt(_payment_request), None)}


def normalize_user(db: dict[str, Any]) -> dict[str, Any]:
    """TelecomUserDB's dump of `db` (as read from user_db.toml/json; {}: the default phone)."""
    def device(obj: Any) -> dict[str, Any]:
        return _model(obj, "device", DEVICE)

    def surroundings(obj: Any) -> dict[str, Any]:
        return _model(obj, "surroundings", SURROUNDINGS)

    return _model(db, "telecom user DB", {"device": (device, lambda: device({})),
                                          "surroundings": (surroundings, lambda: surroundings({}))})


# --- how the phone behaves -----------------------------------------------------------------------

def sim_status(device: Mapping[str, Any]) -> str:
    return "missing" if device["sim_card_missing"] else str(device["sim_card_status"])


_SEARCH = {"4g_only": "4G", "3g_only": "3G", "2g_only": "2G"}


def network_search(db: dict[str, Any]) -> None:
    """The outcome of a cellular network search: connection status, technology and signal."""
    device, around = db["device"], db["surroundings"]
    signals = around["signal_strength"]
    if sim_status(device) == "active":
        device["network_connection_status"] = "connected"
        pref = device["network_mode_preference"]
        if pref == "4g_5g_preferred":
            tech = "4G" if signals.get("5G", "none") == "none" else "5G"
        else:
            tech = _SEARCH.get(pref, "4G")
        device["network_technology_connected"] = tech
        device["network_signal_strength"] = signals.get(tech, "none")
    else:
        no_service(device)
    if device["airplane_mode"] or device["active_apn_settings"]["apn_name"] == "broken" or not around["line_active"]:
        no_service(device)


def no_service(device: dict[str, Any]) -> None:
    device["network_connection_status"] = "no_service"
    device["network_technology_connected"] = "none"
    device["network_signal_strength"] = "none"


_BARS = {"none": "📵 No Signal", "poor": "📶¹ Poor", "fair": "📶² Fair", "good": "📶³ Good",
         "excellent": "📶⁴ Excellent"}


def status_bar(device: Mapping[str, Any]) -> str:
    shown = []
    if device["airplane_mode"]:
        shown.append("✈️ Airplane Mode")
    else:
        shown.append(_BARS.get(device["network_signal_strength"], "📵 No Signal"))
        tech = device["network_technology_connected"]
        if tech != "none":
            shown.append(tech)
        if device["data_enabled"] and tech != "none":
            shown.append("📱 Data Enabled")
            if device["data_saver_mode"]:
                shown.append("🔽 Data Saver")
        else:
            shown.append("📵 Data Disabled")
    if device["wifi_enabled"] and device["wifi_connected"]:
        shown.append(f"📡 Connected to {device['wifi_ssid']}" if device["wifi_ssid"] else "📡 Enabled")
    if device["vpn_connected"]:
        shown.append("🔒 VPN Connected")
    shown.append(f"🔋 {device['battery_level']}%")
    return " | ".join(shown)


def with_status_bar(message: str, db: Mapping[str, Any]) -> str:
    return f"{message}\nStatus Bar: {status_bar(db['device'])}"


def mobile_data_working(db: Mapping[str, Any]) -> bool:
    device, around = db["device"], db["surroundings"]
    if device["airplane_mode"] or device["network_signal_strength"] == "none":
        return False
    if device["network_connection_status"] == "no_service":
        return False
    if around["is_abroad"] and (not device["roaming_enabled"] or not around["roaming_allowed"]):
        return False
    return bool(device["data_enabled"]) and not around["mobile_data_usage_exceeded"]


_TECH_SPEED = {"2G": (0.1, 0.4), "3G": (1.0, 5.0), "4G": (10.0, 100.0), "5G": (50.0, 500.0), "none": (0.0, 0.0)}
_SIGNAL_FACTOR = {"poor": 0.2, "fair": 0.5, "good": 0.8, "excellent": 1.0, "none": 0.0}
_SPEED_BANDS = ((1, "Very Poor"), (5, "Poor"), (25, "Fair"), (100, "Good"))


def speed_test(db: Mapping[str, Any]) -> tuple[float | None, str]:
    """(Mbps, description) of mobile data now; (None, "No Connection") when it does not work."""
    if not mobile_data_working(db):
        return None, "No Connection"
    device = db["device"]
    vpn = device["vpn_details"]
    factor = 0.1 if device["vpn_connected"] and vpn and vpn["server_performance"] == "poor" else 1.0
    if device["data_saver_mode"]:
        factor *= 0.2
    low, high = _TECH_SPEED.get(device["network_technology_connected"], (0.0, 0.0))
    speed = round((low + high) / 2.0 * _SIGNAL_FACTOR.get(device["network_signal_strength"], 0.0) * factor, 2)
    return speed, next((desc for limit, desc in _SPEED_BANDS if speed < limit), "Excellent")


def can_send_mms(db: Mapping[str, Any]) -> bool:
    device = db["device"]
    if not mobile_data_working(db) or device["network_technology_connected"] == "2G":
        return False
    if device["wifi_calling_enabled"] and device["wifi_calling_mms_over_wifi"]:
        return False
    if device["active_apn_settings"]["mmsc_url"] is None:
        return False
    app = device["app_statuses"].get("messaging")
    return bool(app and app["permissions"]["storage"] and app["permissions"]["sms"])
