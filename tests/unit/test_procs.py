"""procs: process identity by start time, group kill with escalation, port holders, open-file limits."""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Callable

import psutil
import pytest

from orchestra_ops.core import procs
from tests.helpers import STUBBORN, free_port


def test_identity_needs_the_same_start_time(spawn: Callable[[str], subprocess.Popen[str]]) -> None:
    child = spawn("import time; time.sleep(600)")
    created = procs.start_time(child.pid)
    assert procs.is_alive(child.pid, created)
    assert not procs.is_alive(child.pid, created - 5)  # a recycled pid is not our process
    child.kill()
    child.wait()
    assert not procs.is_alive(child.pid, created)


def test_zombie_counts_as_gone(spawn: Callable[[str], subprocess.Popen[str]]) -> None:
    child = spawn("pass")
    created = procs.start_time(child.pid)
    for _ in range(200):
        if psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE:
            break
        time.sleep(0.05)
    assert not procs.is_alive(child.pid, created)


def test_terminate_escalates_to_sigkill_for_the_whole_group(spawn: Callable[[str], subprocess.Popen[str]]) -> None:
    parent = spawn(STUBBORN)
    assert parent.stdout is not None
    child_pid = int(parent.stdout.readline())
    leader = psutil.Process(parent.pid)
    members = procs.group_members(parent.pid, parent.pid, leader.create_time())
    assert {p.pid for p in members} == {parent.pid, child_pid}
    result = procs.terminate(procs.process_tree(leader), [parent.pid], timeout=0.5)
    assert {p.pid for p in result.killed} == {parent.pid, child_pid}
    assert result.survivors == []
    parent.wait(timeout=10)
    assert not psutil.pid_exists(child_pid) or psutil.Process(child_pid).status() == psutil.STATUS_ZOMBIE


def test_terminate_never_signals_a_group_none_of_ours_is_in(spawn: Callable[[str], subprocess.Popen[str]]) -> None:
    bystander = spawn("import time; time.sleep(600)")
    ours = spawn("import time; time.sleep(600)")
    result = procs.terminate([psutil.Process(ours.pid)], [bystander.pid], timeout=5)
    assert [p.pid for p in result.terminated] == [ours.pid]
    assert bystander.poll() is None


def test_port_holder_names_the_listening_pid() -> None:
    port = free_port()
    assert procs.port_holder("127.0.0.1", port) is None
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        holder = procs.port_holder("127.0.0.1", port)
        assert holder is not None and holder.pid == os.getpid()
        assert holder.describe() == f"port {port} is held by pid {os.getpid()} ({psutil.Process().name()})"
        assert procs.listeners([port])[port].pid == os.getpid()


def test_nofile_limit_is_capped_at_the_hard_limit_with_a_warning() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard open-file limit here")
    capped = procs.nofile_limit(hard + 1000)
    assert capped.effective == hard and capped.capped
    warning = capped.warning()
    assert warning is not None and str(hard) in warning
    fine = procs.nofile_limit(1024)
    assert fine.effective == 1024 and fine.warning() is None


def test_soft_nofile_is_inherited_and_restored() -> None:
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    with procs.soft_nofile(1100):
        out = subprocess.run([sys.executable, "-c",
                              "import resource; print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])"],
                             capture_output=True, text=True, check=True).stdout
    assert int(out) == 1100
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == before


def test_terminate_counts_a_process_that_died_before_the_wait(spawn: Callable[[str], subprocess.Popen[str]],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The order that made the test above flaky, forced: the process is a zombie before the wait."""
    ours = spawn("import time; time.sleep(600)")
    real_signal_all = procs._signal_all

    def signal_then_wait_for_death(targets, groups, sig):  # type: ignore[no-untyped-def]
        real_signal_all(targets, groups, sig)
        for _ in range(400):
            if psutil.Process(ours.pid).status() == psutil.STATUS_ZOMBIE:
                return
            time.sleep(0.025)

    monkeypatch.setattr(procs, "_signal_all", signal_then_wait_for_death)
    result = procs.terminate([psutil.Process(ours.pid)], [], timeout=5)
    assert [p.pid for p in result.terminated] == [ours.pid]
    assert result.killed == [] and result.survivors == []


def test_a_recycled_group_id_pulls_in_nobody(spawn: Callable[[str], subprocess.Popen[str]]) -> None:
    """A live session leader whose pid is a recorded pgid, but started at another time, is someone else."""
    stranger = spawn("import time; time.sleep(600)")
    created = procs.start_time(stranger.pid)
    assert {p.pid for p in procs.group_members(stranger.pid, stranger.pid, created)} == {stranger.pid}
    assert procs.group_members(stranger.pid, stranger.pid, created - 30) == []
