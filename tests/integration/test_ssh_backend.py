"""The ssh backend against a real sshd on 127.0.0.2 (a "remote" node), started by this module.

The node is this machine reached only through ssh: every launch, poll, log read and stop goes over
the connection; the tests then check on this machine (psutil, /proc) what ssh did there.
"""

from __future__ import annotations

import getpass
import json
import os
import resource
import select
import signal
import subprocess
import time
from pathlib import Path

import psutil

from orchestra_ops.core.procs import listeners
from tests.helpers import free_port, kill_tree
from tests.integration.cluster_fixtures import ClusterHarness, alive, cluster_fixture, harness

cluster = cluster_fixture(slurm=False, sshd=True)
__all__ = ["cluster", "harness"]


def _windows(h: ClusterHarness, session: str) -> list[str]:
    result = subprocess.run(["tmux", "-L", h.socket, "list-windows", "-t", f"={session}", "-F", "#{window_name}"],
                            capture_output=True, text=True, check=False)
    return result.stdout.split()


def test_up_health_logs_kill_down_on_a_remote_node(harness: ClusterHarness) -> None:
    h, address = harness, harness.cluster.ssh_address
    topo = h.topology("far", {"far": h.ssh_node()}, {"m": h.sim("far", replicas=2)}, ulimit_nofile=65536)
    result = h.ops("up", str(topo))
    assert result.returncode == 0, result.stderr
    assert "far: 2 processes ready in" in result.stderr and "on far (ssh)" in result.stderr
    state = h.state("far")
    node = state["nodes"][0]
    assert (node["name"], node["backend"], node["host"]) == ("far", "ssh", address)
    assert (node["handle"]["port"], node["handle"]["session"]) == (h.cluster.ssh_port, "ops-far-far")
    ports = [p["port"] for p in state["processes"]]
    model = state["processes"][0]["served_model_name"]
    assert h.endpoints("far") == {model: [{"ip_addr": address, "port": port} for port in ports]}

    servers = h.servers(ports)
    assert sorted(p.pid for p in servers.values()) == sorted(p["pid"] for p in state["processes"])
    assert _windows(h, "ops-far-far") == ["m/0", "m/1"]  # in tmux on the node
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    expected = 65536 if hard == resource.RLIM_INFINITY else min(65536, hard)
    assert {proc.rlimit(psutil.RLIMIT_NOFILE)[0] for proc in servers.values()} == {expected}
    assert all(conn.laddr.ip == address for proc in servers.values()
               for conn in proc.net_connections("tcp") if conn.status == psutil.CONN_LISTEN)

    health = h.ops("health", "--json")
    assert health.returncode == 0, health.stderr
    assert [(p["state"], p["host"], p["backend"]) for p in json.loads(health.stdout)["processes"]] == [
        ("READY", address, "ssh")] * 2
    status = json.loads(h.ops("status", "--json").stdout)
    assert [(p["alive"], p["state"], p["pid"]) for p in status["processes"]] == [
        (True, "running", p["pid"]) for p in state["processes"]]
    logs = h.ops("logs", "m/1", "-n", "3")
    assert logs.returncode == 0 and f"simllm serving on http://{address}:{ports[1]}" in logs.stdout

    follower = h.popen("logs", "m/0", "-n", "0", "-f")
    try:  # append lines on the node until `tail -F` over ssh (started at some point) passes one on
        assert follower.stdout is not None
        seen, deadline = "", time.monotonic() + 90
        while time.monotonic() < deadline and not seen.startswith("appended on the node"):
            with open(state["processes"][0]["log"], "a") as handle:
                handle.write(f"appended on the node at {time.time()}\n")
            if select.select([follower.stdout], [], [], 0.5)[0]:
                seen = follower.stdout.readline().strip()
        assert seen.startswith("appended on the node at ")
    finally:
        follower.send_signal(signal.SIGINT)
        try:
            follower.wait(timeout=30)
        finally:
            kill_tree(follower.pid)  # never left behind, not even when the Ctrl-C did not end it

    victim = state["processes"][1]
    os.kill(victim["pid"], signal.SIGKILL)
    psutil.wait_procs([servers[victim["port"]]], timeout=10)
    health = h.ops("health", "--json")
    assert health.returncode == 1
    assert {p["name"]: p["state"] for p in json.loads(health.stdout)["processes"]} == {"m/0": "READY",
                                                                                        "m/1": "DEAD"}

    down = h.ops("down")
    assert down.returncode == 0, down.stderr
    assert "far: 1 stopped, 1 already gone; verified: no process, port or tmux session left" in down.stderr
    assert alive(list(servers.values())) == []
    assert listeners(ports) == {}
    assert not h.has_session("ops-far-far")


def test_a_refused_key_names_the_node_and_starts_nothing(harness: ClusterHarness, tmp_path: Path) -> None:
    h = harness
    stranger = tmp_path / "stranger_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    topo = h.topology("key", {"far": h.ssh_node(identity_file=str(stranger)), "cpu": h.local_node()},
                      {"m": h.sim("far"), "c": h.sim("cpu")})
    result = h.ops("up", str(topo))
    assert result.returncode == 3
    where = f"node far ({getpass.getuser()}@{h.cluster.ssh_address}:{h.cluster.ssh_port})"
    assert f"error: refusing to launch:\n  {where}: the server refused our key ({stranger})" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (h.home / "key" / "state.json").exists()  # nothing started, not even the local node


def test_a_wrong_port_names_the_node(harness: ClusterHarness) -> None:
    h = harness
    closed = free_port()  # nothing listens there
    topo = h.topology("port", {"far": h.ssh_node(port=closed)}, {"m": h.sim("far")})
    result = h.ops("up", str(topo))
    assert result.returncode == 3
    assert f"@{h.cluster.ssh_address}:{closed}): cannot connect: connection refused" in result.stderr
    assert "node far (" in result.stderr and "Traceback" not in result.stderr


def test_an_unknown_host_key_is_refused_unless_accept_new(harness: ClusterHarness, tmp_path: Path) -> None:
    h = harness
    known = tmp_path / "known_hosts"
    topo = h.topology("hk", {"far": h.ssh_node(known_hosts=str(known))}, {"m": h.sim("far", replicas=1)})
    refused = h.ops("up", str(topo))
    assert refused.returncode == 3
    assert (f"the host key of [{h.cluster.ssh_address}]:{h.cluster.ssh_port} is not in {known}; connect once "
            "with `ssh` to check and accept it, or set nodes.far.ssh.host_key_check: accept-new") in refused.stderr
    assert not known.exists()
    topo = h.topology("hk", {"far": h.ssh_node(known_hosts=str(known), host_key_check="accept-new")},
                      {"m": h.sim("far", replicas=1)})
    accepted = h.ops("up", str(topo))
    assert accepted.returncode == 0, accepted.stderr
    host_key = (h.cluster.root / "ssh" / "host_ed25519.pub").read_text().split()
    assert known.read_text() == f"[{h.cluster.ssh_address}]:{h.cluster.ssh_port} {host_key[0]} {host_key[1]}\n"
    assert h.ops("down").returncode == 0


def test_a_missing_command_on_the_node_is_refused_before_anything_starts(harness: ClusterHarness) -> None:
    h = harness
    nodes = {"far": {**h.ssh_node(), "gpus": 1}, "cpu": h.local_node()}
    topo = h.topology("novllm", nodes, {"big": {"model": "org/some-model", "node": "far", "port": 18999},
                                        "c": h.sim("cpu")}, vllm_command=["vllm-not-installed-here"])
    result = h.ops("up", str(topo))
    assert result.returncode == 3
    assert (f"@{h.cluster.ssh_address}:{h.cluster.ssh_port}): command not found there: vllm-not-installed-here "
            "(for big/0); PATH there is") in result.stderr
    assert not (h.home / "novllm" / "state.json").exists()


def test_through_a_jump_host(harness: ClusterHarness) -> None:
    """ProxyJump: the node is reached through another sshd (here the same one, as a bastion)."""
    h = harness
    jump = f"{getpass.getuser()}@{h.cluster.ssh_address}:{h.cluster.ssh_port}"
    topo = h.topology("jump", {"far": h.ssh_node(jump=jump)}, {"m": h.sim("far", replicas=1)})
    sshd_log = h.cluster.root / "sshd.out"
    before = len(sshd_log.read_text().splitlines())
    result = h.ops("up", str(topo))
    assert result.returncode == 0, result.stderr
    seen = sshd_log.read_text().splitlines()[before:]
    # two logins (the jump host, then the node through it), one session (the helper, on the node)
    assert sum("Accepted publickey" in line for line in seen) == 2
    assert sum("Starting session" in line for line in seen) == 1
    assert h.state("jump")["nodes"][0]["handle"]["jump"] == jump
    assert h.ops("down").returncode == 0


def test_down_on_an_unreachable_node_says_so_and_keeps_the_fleet_recorded(harness: ClusterHarness) -> None:
    h = harness
    topo = h.topology("lost", {"far": h.ssh_node()}, {"m": h.sim("far", replicas=1)})
    assert h.ops("up", str(topo)).returncode == 0
    state_file = h.home / "lost" / "state.json"
    good = state_file.read_text()
    closed = free_port()  # nothing listens there
    state = json.loads(good)
    state["nodes"][0]["handle"]["port"] = closed  # as if the node's sshd were gone
    state_file.write_text(json.dumps(state))
    down = h.ops("down")
    assert down.returncode == 1
    assert f"@{h.cluster.ssh_address}:{closed}): cannot connect: connection refused" in down.stderr
    assert "the fleet stays recorded as up" in down.stderr
    assert h.state("lost")["status"] == "up"
    server = psutil.Process(state["processes"][0]["pid"])
    assert alive([server]) == [server.pid]  # nothing was stopped
    state_file.write_text(good)  # the node is back
    again = h.ops("down")
    assert again.returncode == 0, again.stderr
    assert h.state("lost")["status"] == "down" and alive([server]) == []
