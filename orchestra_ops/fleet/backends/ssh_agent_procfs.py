"""What the ssh agent (ssh_agent.py) reads from a node's /proc: a process by its pid and start time, the
process family a stop signals, the uptime of a process, and the TCP ports listening or taken.

Standard library only, like the agent: ssh.py sends this source and then ssh_agent.py's as one script
(`PYTHON -c SOURCE serve`). A pid is identified by its start time in clock ticks since boot (/proc/PID/stat
field 22), so a recycled pid is never signalled.
"""

from __future__ import annotations

import errno
import os
import socket

LISTEN = "0A"


def stat(pid: int) -> tuple[str, int, int, int, int] | None:
    """(state, ppid, pgrp, session, start ticks) of a live pid, or None."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            text = handle.read()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19])


def alive(pid: int, ticks: int | None) -> bool:
    info = stat(pid)
    return info is not None and info[0] not in "ZX" and (ticks is None or info[4] == ticks)


def all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def family(pid: int, ticks: int) -> dict[int, int]:
    """The process (if still ours), its descendants, and the live members of its process group, each with
    its start ticks (so a pid that exits and is reused meanwhile is never signalled)."""
    table = {}
    for other in all_pids():
        info = stat(other)
        if info is not None and info[0] not in "ZX":
            table[other] = info
    if pid in table and table[pid][4] != ticks:
        return {}  # the pid (so the group id, which the kernel never reuses while in use) is someone else's
    found = set()
    if pid in table:
        found.add(pid)
    for other, info in table.items():  # the group and session the pid leads, started after it
        if info[2] == pid and info[3] == pid and info[4] >= ticks:
            found.add(other)
    grew = True
    while grew:
        grew = False
        for other, info in table.items():
            if other not in found and info[1] in found:
                found.add(other)
                grew = True
    return {member: table[member][4] for member in found}


def uptime_s(ticks: int) -> float:
    with open("/proc/uptime") as handle:
        up = float(handle.read().split()[0])
    return max(0.0, up - ticks / os.sysconf("SC_CLK_TCK"))


def listening(port: int, bind: str) -> bool:
    """Is a TCP socket listening on `port` at `bind` (or on every address)?"""
    wanted = {bind, "0.0.0.0", "::"} if bind not in ("0.0.0.0", "::") else None
    for name, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            with open(name) as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            parts = row.split()
            address, _, hex_port = parts[1].partition(":")
            if parts[3] != LISTEN or int(hex_port, 16) != port:
                continue
            if wanted is None or _address(address, width) in wanted:
                return True
    return False


def _address(hex_address: str, width: int) -> str:
    raw = bytes.fromhex(hex_address)
    if width == 8:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    text = socket.inet_ntop(socket.AF_INET6, words)
    return text[7:] if text.startswith("::ffff:") else text


def port_taken(bind: str, port: int) -> bool:
    address_family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    with socket.socket(address_family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((bind, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False
