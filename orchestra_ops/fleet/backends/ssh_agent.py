"""The helper the ssh backend runs on a node: `PYTHON -c SOURCE serve`, one JSON request per line.

Standard library only (a GPU node has python3, not necessarily orchestra-ops). It stays up for as
long as the backend's ssh connection, so a request costs no new remote shell. Actions:

    check   commands on PATH, ports free, tmux present, session absent, the hard open-file limit
    launch  append a header to each log, start each process in a tmux window, read its pid
    poll    each process alive (pid + start ticks from /proc), its uptime, its new log bytes
    stop    group SIGTERM, wait, SIGKILL, kill the session, verify: no process, port or session left
    tail    the last lines of a log (after it stopped growing)
    run     one command to its end (fleet/argv_check.py: the node's vLLM parses a replica's argv)

A pid is identified by its start time in clock ticks since boot (/proc/PID/stat field 22), so a
recycled pid is never signalled. The module is imported by the tests and by `ssh.py` (to send its
source), never run by orchestra-ops on this machine.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from typing import Any

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


def tmux(socket_name: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    prefix = ["tmux", "-L", socket_name] if socket_name else ["tmux"]
    return subprocess.run([*prefix, *args], capture_output=True, text=True, check=False)


def has_session(socket_name: str | None, session: str) -> bool:
    return shutil.which("tmux") is not None and tmux(socket_name, "has-session", "-t", f"={session}").returncode == 0


def check(req: dict[str, Any]) -> dict[str, Any]:
    missing = sorted({cmd for cmd in req["commands"] if not _runnable(cmd)})
    taken = [port for bind, port in req["ports"] if port_taken(bind, port)]
    return {"path": os.environ.get("PATH", ""), "missing": missing, "ports_taken": taken,
            "tmux": shutil.which("tmux") is not None, "stdbuf": shutil.which("stdbuf") is not None,
            "hard_nofile": _hard_nofile(),
            "session_exists": has_session(req.get("socket"), req["session"]),
            "home": os.path.expanduser("~"), "host": socket.gethostname()}


def _runnable(command: str) -> bool:
    if "/" in command:
        return os.access(os.path.expanduser(command), os.X_OK)
    return shutil.which(command) is not None


def _hard_nofile() -> int | None:
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return None if hard == resource.RLIM_INFINITY else hard


def launch(req: dict[str, Any]) -> dict[str, Any]:
    """Every window in one tmux invocation (commands separated by ';'), each printing `WINDOW PID`."""
    socket_name, session, workdir = req.get("socket"), req["session"], req["workdir"]
    offsets = {}
    for window in req["windows"]:
        os.makedirs(os.path.dirname(window["log"]), exist_ok=True)
        with open(window["log"], "ab", buffering=0) as handle:
            offsets[window["name"]] = handle.tell()
            handle.write(f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} ops up: {window['header']}\n".encode())
    fmt = "#{window_id} #{pane_pid}"
    args: list[str] = []
    exists = has_session(socket_name, session)
    for window in req["windows"]:
        if args:
            args.append(";")
        if exists:
            args += ["new-window", "-d", "-P", "-F", fmt, "-t", f"={session}:", "-n", window["name"], "-c", workdir]
        else:
            args += ["new-session", "-d", "-P", "-F", fmt, "-s", session, "-n", window["name"], "-c", workdir,
                     "-x", "200", "-y", "50"]
            exists = True
        args += ["--", "bash", "--norc", "-c", window["script"]]
    result = tmux(socket_name, *args) if args else subprocess.CompletedProcess([], 0, "", "")
    started: list[dict[str, Any]] = []
    for window, line in zip(req["windows"], result.stdout.splitlines(), strict=False):
        window_id, pid = line.split()
        info = stat(int(pid))
        started.append({"name": window["name"], "window": window_id, "pid": int(pid),
                        "offset": offsets[window["name"]], "start_ticks": info[4] if info else -1})
    error = None
    if result.returncode != 0 or len(started) < len(req["windows"]):
        failed = req["windows"][len(started)]["name"]
        error = f"tmux could not start {failed}: {result.stderr.strip() or f'exit status {result.returncode}'}"
    return {"started": started, "error": error}


def poll(req: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for proc in req["procs"]:
        info = stat(proc["pid"])
        is_alive = alive(proc["pid"], proc["start_ticks"])
        entry: dict[str, Any] = {"alive": is_alive, "uptime_s": uptime_s(info[4]) if is_alive and info else None}
        if proc.get("offset") is not None:
            data = b""
            with contextlib.suppress(OSError), open(proc["log"], "rb") as handle:
                handle.seek(proc["offset"])
                data = handle.read(req.get("limit", 262144))
            entry["log"] = base64.b64encode(data).decode()
            entry["log_end"] = proc["offset"] + len(data)
        out[proc["name"]] = entry
    return {"procs": out}


def stop(req: dict[str, Any]) -> dict[str, Any]:
    owner: dict[int, tuple[str, int]] = {}  # pid -> (process name, start ticks)
    gone: list[str] = []
    groups = set()
    for proc in req["procs"]:
        members = family(proc["pid"], proc["start_ticks"])
        if not members:
            gone.append(proc["name"])
            continue
        for pid, ticks in members.items():
            owner.setdefault(pid, (proc["name"], ticks))
        groups.add(proc["pid"])
    _signal(owner, groups, signal.SIGTERM)
    deadline = time.monotonic() + req["timeout"]
    while time.monotonic() < deadline and _still(owner):
        time.sleep(0.05)
    stubborn = _still(owner)
    if stubborn:
        _signal({pid: owner[pid] for pid in stubborn}, groups, signal.SIGKILL)
        deadline = time.monotonic() + max(2.0, req["timeout"] / 2)
        while time.monotonic() < deadline and _still(owner):
            time.sleep(0.05)
    killed = sorted({owner[pid][0] for pid in stubborn})
    names = [proc["name"] for proc in req["procs"]]
    terminated = [name for name in names if name not in gone and name not in killed]
    host = socket.gethostname()
    left = set(_still(owner))
    for proc in req["procs"]:  # and anything that joined a group since the snapshot
        left.update(family(proc["pid"], proc["start_ticks"]))
    session_left = None
    if req.get("session") and has_session(req.get("socket"), req["session"]):
        tmux(req.get("socket"), "kill-session", "-t", f"={req['session']}")
        if has_session(req.get("socket"), req["session"]):
            session_left = req["session"]
    ports = [f"port {port} on {host} is still listening" for bind, port in req["ports"] if listening(port, bind)]
    return {"terminated": terminated, "killed": killed, "already_gone": gone,
            "leftovers": [f"pid {pid} on {host}" for pid in sorted(left)], "ports_listening": ports,
            "session_left": session_left}


def _still(owner: dict[int, tuple[str, int]]) -> list[int]:
    return [pid for pid, (_, ticks) in owner.items() if alive(pid, ticks)]


def _signal(owner: dict[int, tuple[str, int]], groups: set[int], sig: int) -> None:
    """Signal the groups one of ours is still in, then each of ours that is still the same process."""
    live = {pid: stat(pid) for pid in _still(owner)}
    pgrps = {info[2] for info in live.values() if info is not None}
    for pgid in groups & pgrps:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
    for pid in live:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def tail(req: dict[str, Any]) -> dict[str, Any]:
    path, deadline, last = req["log"], time.monotonic() + (1.0 if req.get("settle") else 0), -1
    while time.monotonic() < deadline:
        size = os.path.getsize(path) if os.path.exists(path) else -1
        if size == last:
            break
        last = size
        time.sleep(0.15)
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            start = max(req.get("offset", 0), size - 65536 * (req["lines"] // 100 + 1))
            handle.seek(start)
            data = handle.read()
    except OSError:
        return {"lines": None}
    lines = data.decode("utf-8", errors="replace").splitlines()
    if start > req.get("offset", 0) and lines:
        lines = lines[1:]
    return {"lines": lines[-req["lines"]:] if req["lines"] > 0 else []}


def run(req: dict[str, Any]) -> dict[str, Any]:
    """Run `argv` in `cwd` with `env` over the agent's environment; its exit status and output."""
    env = {**os.environ, **req.get("env", {})}
    cwd = os.path.expanduser(req.get("cwd") or "~")
    try:
        done = subprocess.run(req["argv"], cwd=cwd, env=env, capture_output=True, text=True, check=False,
                              timeout=req.get("timeout", 300), stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"code": 124, "stdout": "", "stderr": f"no answer within {req.get('timeout', 300)} s"}
    except OSError as exc:
        return {"code": 127, "stdout": "", "stderr": str(exc)}
    return {"code": done.returncode, "stdout": done.stdout[-65536:], "stderr": done.stderr[-65536:]}


ACTIONS = {"check": check, "launch": launch, "poll": poll, "stop": stop, "tail": tail, "run": run}


def serve() -> int:
    """Answer one JSON request per stdin line until stdin closes (the ssh backend's session)."""
    for line in sys.stdin:
        reply: dict[str, Any]
        try:
            request = json.loads(line)
            reply = {"result": ACTIONS[request["action"]](request["payload"]), "error": None}
        except Exception as exc:  # the caller gets the reason instead of a dead session
            reply = {"result": None, "error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(serve())
