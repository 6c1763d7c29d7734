"""The helper the ssh backend runs on a node, run here: identity by start ticks, group stop, ports, serve."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from orchestra_ops.fleet.backends import ssh_agent
from orchestra_ops.fleet.backends.ssh import AGENT_SOURCE
from tests.helpers import STUBBORN, free_port


def test_identity_is_pid_and_start_ticks(spawn: Callable[[str], subprocess.Popen[str]]) -> None:
    proc = spawn("import time; time.sleep(600)")
    info = ssh_agent.stat(proc.pid)
    assert info is not None
    _, ppid, pgrp, session, ticks = info
    assert (ppid, pgrp, session) == (os.getpid(), proc.pid, proc.pid)
    assert ssh_agent.alive(proc.pid, ticks)
    assert not ssh_agent.alive(proc.pid, ticks - 1)  # a recycled pid is not ours
    answer = ssh_agent.poll({"procs": [{"name": "p", "pid": proc.pid, "start_ticks": ticks, "log": "/nope",
                                        "offset": None}]})
    assert answer["procs"]["p"]["alive"] and answer["procs"]["p"]["uptime_s"] >= 0


def test_stop_escalates_for_the_whole_group_and_spares_strangers(spawn: Callable[[str], subprocess.Popen[str]]) -> None:
    stubborn = spawn(STUBBORN)
    assert stubborn.stdout is not None
    child = int(stubborn.stdout.readline())
    stranger = spawn("import time; time.sleep(600)")
    ticks = ssh_agent.stat(stubborn.pid)[4]  # type: ignore[index]
    assert set(ssh_agent.family(stubborn.pid, ticks)) == {stubborn.pid, child}
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        report = ssh_agent.stop({"procs": [{"name": "s", "pid": stubborn.pid, "start_ticks": ticks},
                                           {"name": "old", "pid": stranger.pid, "start_ticks": 1}],
                                 "ports": [["127.0.0.1", port]], "timeout": 0.5, "session": None})
    assert (report["killed"], report["already_gone"], report["leftovers"]) == (["s"], ["old"], [])
    assert report["ports_listening"] == [f"port {port} on {socket.gethostname()} is still listening"]
    assert stubborn.wait(timeout=10) == -signal.SIGKILL
    assert stranger.poll() is None  # a pid whose start ticks do not match is never signalled


def test_ports_in_use_and_listening(spawn: Callable[[str], subprocess.Popen[str]]) -> None:
    port = free_port()
    assert not ssh_agent.port_taken("127.0.0.1", port) and not ssh_agent.listening(port, "127.0.0.1")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        assert ssh_agent.port_taken("127.0.0.1", port)
        assert ssh_agent.listening(port, "127.0.0.1") and ssh_agent.listening(port, "0.0.0.0")
        assert not ssh_agent.listening(port, "127.0.0.2")  # another address of the node is free


def test_tail_reads_this_run_only(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("old run\n")
    offset = log.stat().st_size
    with open(log, "a") as handle:
        handle.write("".join(f"line {i}\n" for i in range(5)))
    assert ssh_agent.tail({"log": str(log), "offset": offset, "lines": 3})["lines"] == ["line 2", "line 3", "line 4"]
    assert ssh_agent.tail({"log": str(log), "offset": 0, "lines": 100})["lines"][0] == "old run"
    assert ssh_agent.tail({"log": str(tmp_path / "none"), "offset": 0, "lines": 3})["lines"] is None


def test_the_sent_source_serves_one_json_line_per_request(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"abc\xffdef\n")
    requests = [{"action": "poll", "payload": {"procs": [{"name": "me", "pid": os.getpid(), "start_ticks": None,
                                                          "log": str(log), "offset": 3}]}},
                {"action": "nope", "payload": {}},
                {"action": "check", "payload": {"commands": ["sh", "no-such-cmd-xyz"], "ports": [],
                                                "session": "ops-none-here", "socket": "ops-test-none"}}]
    result = subprocess.run([sys.executable, "-c", AGENT_SOURCE, "serve"], capture_output=True, text=True,
                            input="".join(json.dumps(r) + "\n" for r in requests), timeout=60, check=True)
    replies = [json.loads(line) for line in result.stdout.splitlines()]
    me = replies[0]["result"]["procs"]["me"]
    assert (me["alive"], base64.b64decode(me["log"]), me["log_end"]) == (True, b"\xffdef\n", 8)
    assert replies[1] == {"result": None, "error": "KeyError: 'nope'"}
    check = replies[2]["result"]
    assert (check["missing"], check["session_exists"], check["ports_taken"]) == (["no-such-cmd-xyz"], False, [])
