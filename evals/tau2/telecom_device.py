"""τ²-bench's `telecom` domain, user side: the 30 tools the user simulator uses on their phone
(the env functions that break or check the phone, and the sync, are in `telecom_scenario`).

Every tool answers as τ²-bench's does (most end with the status bar); a refusal the phone itself
reports ("Cannot change Wi-Fi settings while Airplane Mode is ON") is an answer, not an error.

Known difference: τ²-bench's `connect_vpn` hands the phone its class-wide default VPN details object,
which `break_vpn` then degrades in place, so in one τ²-bench process every VPN connected after any
`break_vpn` (in any task) is a poor one. Here `connect_vpn` always connects to the default
(excellent) server, and `break_vpn` degrades only this phone's connection.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from orchestra_ops.evals.tau2.domain import READ, WRITE, Toolkit, param
from orchestra_ops.evals.tau2.telecom_phone import (
    MODE_PREFERENCES,
    can_send_mms,
    network_search,
    sim_status,
    speed_test,
    status_bar,
    validate_apn_settings,
    with_status_bar,
)

user = Toolkit()
DEFAULT_VPN = {"server_address": "192.168.1.1", "protocol": "OpenVPN", "server_performance": "excellent"}
_ON = {True: "ON", False: "OFF"}
_YES = {True: "Yes", False: "No"}


def _device(db: dict[str, Any]) -> dict[str, Any]:
    device: dict[str, Any] = db["device"]
    return device


# --- status and checks (read) --------------------------------------------------------------------

@user.tool(READ, "Shows what icons are currently visible in your phone's status bar (the area at the top of the "
           "screen). Displays network signal strength, mobile data status (enabled, disabled, data saver), Wi-Fi "
           "status, and battery level.")
def check_status_bar(db: dict[str, Any]) -> str:
    return f"Status Bar: {status_bar(db['device'])}"


@user.tool(READ, "Checks your phone's connection status to cellular networks and Wi-Fi. Shows airplane mode status, "
           "signal strength, network type, whether mobile data is enabled, and whether data roaming is enabled.")
def check_network_status(db: dict[str, Any]) -> str:
    d = _device(db)
    lines = [f"Airplane Mode: {_ON[bool(d['airplane_mode'])]}", f"SIM Card Status: {sim_status(d)}",
             f"Cellular Connection: {d['network_connection_status']}",
             f"Cellular Signal: {d['network_signal_strength']}",
             f"Cellular Network Type: {d['network_technology_connected']}",
             f"Mobile Data Enabled: {_YES[bool(d['data_enabled'])]}",
             f"Data Roaming Enabled: {_YES[bool(d['roaming_enabled'])]}",
             f"Wi-Fi Radio: {_ON[bool(d['wifi_enabled'])]}", f"Wi-Fi Connected: {_YES[bool(d['wifi_connected'])]}"]
    if d["wifi_connected"]:
        lines.append(f"Connected Wi-Fi Network: {d['wifi_ssid']}")
    return "\n".join(lines)


@user.tool(READ, "Shows the current network mode preference.")
def check_network_mode_preference(db: dict[str, Any]) -> str:
    return f"Network Mode Preference: {_device(db)['network_mode_preference']}"


@user.tool(READ, "Measures your current internet connection speed (download speed). Provides information about "
           "connection quality and what activities it can support.")
def run_speed_test(db: dict[str, Any]) -> str:
    speed, desc = speed_test(db)
    if speed is None:
        return f"Speed test failed: {desc or 'Could not determine speed'}."
    advice = {"Very Poor": "Connection is very slow. Basic web browsing might be difficult.",
              "Poor": "Connection is slow. Web browsing may be sluggish, streaming difficult.",
              "Fair": "Connection is okay for web browsing and some standard definition streaming.",
              "Good": "Connection is good for most activities, including HD streaming.",
              "Excellent": "Connection is very fast."}.get(desc, "")
    return f"Speed Test Result: {speed:.2f} Mbps ({desc}). {advice}"


@user.tool(READ, "Checks if your SIM card is working correctly and displays its current status. Shows if the SIM "
           "is active, missing, or locked with a PIN or PUK code.")
def check_sim_status(db: dict[str, Any]) -> str:
    status = sim_status(_device(db))
    return {"active": "Your SIM card is active and working.", "missing": "No SIM card detected in the phone.",
            "locked_pin": "The SIM card is locked with a PIN code.",
            "locked_puk": "The SIM card is locked with a PUK code."}.get(status, f"Unknown SIM status: {status}")


@user.tool(READ, "Checks if your phone has any data-limiting features active. Shows if Data Saver mode is on.")
def check_data_restriction_status(db: dict[str, Any]) -> str:
    if _device(db)["data_saver_mode"]:
        return "Data Saver mode is ON (limits data usage)."
    return "Data Saver mode is OFF."


@user.tool(READ, "Checks the technical APN settings your phone uses to connect to your carrier's mobile data "
           "network. Shows current APN name and MMSC URL for picture messaging.")
def check_apn_settings(db: dict[str, Any]) -> str:
    apn = _device(db)["active_apn_settings"]
    return (f"Current APN Name: {apn['apn_name'] or 'Not Set'}\nMMSC URL (for picture messages): "
            f"{apn['mmsc_url'] or 'Not Set'}\n(These are technical settings, usually best left unchanged.)")


@user.tool(READ, "Checks your Wi-Fi connection status. Shows if Wi-Fi is turned on, which network you're connected "
           "to (if any), and the signal strength.")
def check_wifi_status(db: dict[str, Any]) -> str:
    d = _device(db)
    if not d["wifi_enabled"]:
        return "Wi-Fi is turned OFF."
    if d["wifi_connected"]:
        return f"Wi-Fi is ON and connected to '{d['wifi_ssid']}'. Signal strength: {d['wifi_signal_strength']}."
    return "Wi-Fi is ON but not connected to any network."


@user.tool(READ, "Checks if Wi-Fi Calling is enabled on your device. This feature allows you to make and receive "
           "calls over a Wi-Fi network instead of using the cellular network.")
def check_wifi_calling_status(db: dict[str, Any]) -> str:
    return f"Wi-Fi Calling is currently turned {_ON[bool(_device(db)['wifi_calling_enabled'])]}."


def _vpn_repr(details: dict[str, Any]) -> str:
    """The details as τ²-bench prints its dump: a Python dict with the performance enum's repr."""
    level = details["server_performance"]
    return (f"{{'server_address': {details['server_address']!r}, 'protocol': {details['protocol']!r}, "
            f"'server_performance': <PerformanceLevel.{level.upper()}: {level!r}>}}")


@user.tool(READ, "Checks if you're using a VPN (Virtual Private Network) connection. Shows if a VPN is active, "
           "connected, and displays any available connection details.")
def check_vpn_status(db: dict[str, Any]) -> str:
    d = _device(db)
    if d["vpn_connected"]:
        if d["vpn_details"]:
            return f"VPN is ON and connected. Details: {_vpn_repr(d['vpn_details'])}"
        return "VPN is ON and connected (no specific details available)."
    if d["vpn_enabled_setting"]:
        return "VPN is turned ON in settings, but currently not connected."
    return "VPN is turned OFF."


@user.tool(READ, "Returns the name of all installed apps on the phone.")
def check_installed_apps(db: dict[str, Any]) -> str:
    return f"The following apps are installed on the phone: {', '.join(_device(db)['app_statuses'])}"


def _granted(app: dict[str, Any]) -> list[str]:
    return [name.replace("_", " ").lower() for name, allowed in app["permissions"].items() if allowed]


APP_NAME = param("string", "The name of the app.")


@user.tool(READ, "Checks detailed information about a specific app. Shows its permissions and background data "
           "usage settings.", app_name=APP_NAME)
def check_app_status(db: dict[str, Any], app_name: str) -> str:
    app = _device(db)["app_statuses"].get(app_name)
    if app is None:
        return f"App '{app_name}' not found on this phone."
    granted = _granted(app)
    lines = [f"Status for App: {app_name}"]
    lines += [" - Permissions Granted:", *(f"   - {p}" for p in granted)] if granted else \
        [" - Permissions: None granted."]
    return "\n".join(lines)


@user.tool(READ, "Checks what permissions a specific app currently has. Shows if the app has access to features "
           "like storage, camera, location, etc.", app_name=APP_NAME)
def check_app_permissions(db: dict[str, Any], app_name: str) -> str:
    app = _device(db)["app_statuses"].get(app_name)
    if app is None:
        return f"App '{app_name}' not found on this phone."
    granted = _granted(app)
    if not granted:
        return f"App '{app_name}' currently has no permissions granted."
    return f"App '{app_name}' has permission for: {', '.join(granted)}."


@user.tool(READ, "Checks if the default messaging app can send MMS messages.")
def can_send_mms_tool(db: dict[str, Any]) -> str:
    return f"Your messaging app {'can' if can_send_mms(db) else 'cannot'} send MMS messages."


@user.tool(READ, "Checks if the agent has sent you a payment request.")
def check_payment_request(db: dict[str, Any]) -> str:
    request = db["surroundings"]["payment_request"]
    if request is None:
        return "No payment request has been made."
    return f"You have a payment request for bill {request['bill_id']} of {request['amount_due']} USD."


# --- settings and actions (write) -----------------------------------------------------------------

@user.tool(WRITE, "Changes the type of cellular network your phone prefers to connect to (e.g., 5G, LTE/4G, 3G). "
           "Higher-speed networks (LTE/5G) provide faster data but may use more battery.",
           mode=param("string", "The network mode preference.", enum=list(MODE_PREFERENCES)))
def set_network_mode_preference(db: dict[str, Any], mode: str) -> str:
    if mode not in MODE_PREFERENCES:
        return with_status_bar(f"Failed to set network mode: '{mode}' is not a valid option. Please use one of: "
                               f"{', '.join(MODE_PREFERENCES)}", db)
    _device(db)["network_mode_preference"] = mode
    network_search(db)
    return with_status_bar(f"Preferred Network Mode set to: {mode}", db)


def _toggle_airplane(db: dict[str, Any]) -> bool:
    d = _device(db)
    was_on = bool(d["airplane_mode"])
    d["airplane_mode"] = not was_on
    if was_on:
        d["network_connection_status"] = "searching"
    if not was_on or d["wifi_enabled"]:
        d.update(wifi_connected=False, wifi_ssid=None, wifi_signal_strength="none")
    if not was_on and d["vpn_connected"]:
        _disconnect_vpn(d)
    network_search(db)
    return not was_on


@user.tool(WRITE, "Toggles Airplane Mode ON or OFF. When ON, it disconnects all wireless communications including "
           "cellular, Wi-Fi, and Bluetooth. Returns the new state of airplane_mode.")
def toggle_airplane_mode(db: dict[str, Any]) -> str:
    return with_status_bar(f"Airplane Mode is now {_ON[_toggle_airplane(db)]}.", db)


@user.tool(WRITE, "Simulates removing and reinserting your SIM card. This can help resolve recognition issues.")
def reseat_sim_card(db: dict[str, Any]) -> str:
    _device(db)["sim_card_missing"] = False
    network_search(db)
    return with_status_bar("SIM card re-seated successfully.", db)


def _flip(db: dict[str, Any], setting: str, search: bool = True) -> bool:
    d = _device(db)
    d[setting] = not d[setting]
    if search:
        network_search(db)
    return bool(d[setting])


@user.tool(WRITE, "Toggles your phone's mobile data connection ON or OFF. Controls whether your phone can use "
           "cellular data for internet access when Wi-Fi is unavailable. Returns the new data connection status.")
def toggle_data(db: dict[str, Any]) -> str:
    return with_status_bar(f"Mobile Data is now {_ON[_flip(db, 'data_enabled')]}.", db)


@user.tool(WRITE, "Toggles Data Roaming ON or OFF. When ON, your phone can use data networks in areas outside your "
           "carrier's coverage. Returns the new data roaming status.")
def toggle_roaming(db: dict[str, Any]) -> str:
    return with_status_bar(f"Data Roaming is now {_ON[_flip(db, 'roaming_enabled')]}.", db)


@user.tool(WRITE, "Toggles Data Saver mode ON or OFF. When ON, it reduces data usage, which may affect data speed. "
           "Returns the new data saver mode status.")
def toggle_data_saver_mode(db: dict[str, Any]) -> str:
    return with_status_bar(f"Data Saver Mode is now {_ON[_flip(db, 'data_saver_mode', search=False)]}.", db)


@user.tool(WRITE, "Sets the APN settings for the phone.", apn_settings=param(
    "object", "The APN settings: apn_name (internet|broken), reset_at_reboot, mms_apn, mmsc_url, mms_proxy, mms_port."))
def set_apn_settings(db: dict[str, Any], apn_settings: dict[str, Any]) -> str:
    settings = validate_apn_settings(apn_settings)
    _device(db)["active_apn_settings"] = settings
    network_search(db)
    return with_status_bar(f"APN settings set to: {settings['apn_name']}", db)


@user.tool(WRITE, "Resets your APN settings to the default settings.")
def reset_apn_settings(db: dict[str, Any]) -> str:
    _device(db)["active_apn_settings"]["reset_at_reboot"] = True
    network_search(db)
    return with_status_bar("APN settings will reset at reboot.", db)


@user.tool(WRITE, "Toggles your phone's Wi-Fi radio ON or OFF. Controls whether your phone can discover and "
           "connect to wireless networks for internet access. Returns the new Wi-Fi status.")
def toggle_wifi(db: dict[str, Any]) -> str:
    d = _device(db)
    if d["airplane_mode"]:
        return with_status_bar("Cannot change Wi-Fi settings while Airplane Mode is ON.", db)
    d["wifi_enabled"] = not d["wifi_enabled"]
    if not d["wifi_enabled"]:
        d.update(wifi_connected=False, wifi_ssid=None, wifi_signal_strength="none")
    return with_status_bar(f"Wi-Fi is now {_ON[bool(d['wifi_enabled'])]}.", db)


@user.tool(WRITE, "Toggles Wi-Fi Calling ON or OFF. This feature allows you to make and receive calls over Wi-Fi "
           "instead of the cellular network, which can help in areas with weak cellular signal. Returns the new "
           "Wi-Fi Calling status.")
def toggle_wifi_calling(db: dict[str, Any]) -> str:
    return with_status_bar(f"Wi-Fi Calling is now {_ON[_flip(db, 'wifi_calling_enabled', search=False)]}.", db)


@user.tool(WRITE, "Connects to your VPN (Virtual Private Network).")
def connect_vpn(db: dict[str, Any]) -> str:
    d = _device(db)
    if d["vpn_connected"]:
        return "VPN already connected."
    d["vpn_connected"] = True
    d["vpn_details"] = dict(DEFAULT_VPN)
    return with_status_bar("VPN connected successfully.", db)


def _disconnect_vpn(device: dict[str, Any]) -> bool:
    if not device["vpn_connected"]:
        return False
    device["vpn_connected"] = False
    device["vpn_details"] = None
    return True


@user.tool(WRITE, "Disconnects any active VPN (Virtual Private Network) connection. Stops routing your internet "
           "traffic through a VPN server, which might affect connection speed or access to content.")
def disconnect_vpn(db: dict[str, Any]) -> str:
    done = _disconnect_vpn(_device(db))
    return with_status_bar("VPN disconnected successfully." if done else "No active VPN connection to disconnect.", db)


@user.tool(WRITE, "Gives a specific permission to an app (like access to storage, camera, or location). Required "
           "for some app functions to work properly.", app_name=param("string", "The name of the app to grant the "
                                                                     "permission to."),
           permission=param("string", "The permission to grant, should be lowercase."))
def grant_app_permission(db: dict[str, Any], app_name: str, permission: str) -> str:
    app = _device(db)["app_statuses"].get(app_name)
    permission = permission.lower()
    if app is None:
        message = f"Error. App '{app_name}' not found. Cannot grant permission."
    elif permission not in app["permissions"]:
        message = (f"Error. Permission '{permission}' not tracked for app '{app_name}', available permissions: "
                   f"{list(app['permissions'])}")
    else:
        app["permissions"][permission] = True
        message = f"Success. Permission '{permission}' granted to app '{app_name}'."
    return with_status_bar(message, db)


@user.tool(WRITE, "Restarts your phone completely. This can help resolve many temporary software glitches by "
           "refreshing all running services and connections.")
def reboot_device(db: dict[str, Any]) -> str:
    d = _device(db)
    lines = []
    if d["active_apn_settings"]["reset_at_reboot"]:
        lines.append("Resetting APN settings...")
        d["active_apn_settings"] = validate_apn_settings({})
    lines.append("Restarting network services...")
    d["network_connection_status"] = "searching"
    network_search(db)
    return with_status_bar("\n".join(lines), db)


@user.tool(WRITE, "Makes a payment for the bill that the agent has sent you.")
def make_payment(db: dict[str, Any]) -> str:
    request = db["surroundings"]["payment_request"]
    if request is None:
        return "You do not have a payment request."
    request["paid"] = True
    return f"Payment of {request['amount_due']} USD has been made for bill {request['bill_id']}."


# τ²-bench's tool is named can_send_mms, as is the phone's check this module imports
user.tools["can_send_mms"] = replace(user.tools.pop("can_send_mms_tool"), name="can_send_mms")
