"""tests/ports.py: no two processes get one port, a bound port is skipped, a killed owner frees its slice."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import REPO, free_port, free_port_block
from tests.ports import LOWEST, PortPool, default_highest

TAKER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from tests.ports import PortPool
    lowest, highest, lock_dir, rounds = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
    pool = PortPool(lowest, highest, slice_size=10, lock_dir=lock_dir)
    ports = []
    for count in [1, 3, 2] * rounds:
        first = pool.take(count)
        ports += range(first, first + count)
    print(json.dumps(ports), flush=True)
    sys.stdin.read()  # hold the slices until told to go
""")


def _taker(lowest: int, highest: int, lock_dir: Path, rounds: int) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", TAKER, str(lowest), str(highest), str(lock_dir), str(rounds)],
                            cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _ours(count: int) -> int:
    """A block of `count` ports this process owns in the suite's own pool: no other test gets them, so a pool
    over just these ports sees only what the test itself binds."""
    return free_port_block(count)


def test_ports_come_from_below_the_ephemeral_range() -> None:
    port, first = free_port(), free_port_block(4)
    assert LOWEST <= port < default_highest() and LOWEST <= first < first + 3 < default_highest()
    assert port not in range(first, first + 4)


def test_processes_taking_ports_at_once_never_share_one(tmp_path: Path) -> None:
    first = _ours(60)  # six slices of 10, one process holds each slice it takes until it exits
    takers = [_taker(first, first + 60, tmp_path, rounds=3) for _ in range(3)]  # 18 ports each: 2 slices
    try:
        taken = [json.loads(proc.stdout.readline()) for proc in takers if proc.stdout is not None]
    finally:
        for proc in takers:
            proc.communicate("", timeout=30)
    assert [len(ports) for ports in taken] == [18, 18, 18]
    everything = [port for ports in taken for port in ports]
    assert len(set(everything)) == 54 and all(first <= port < first + 60 for port in everything)


def test_a_port_bound_elsewhere_is_skipped_and_a_block_steps_over_it(tmp_path: Path) -> None:
    first = _ours(8)
    pool = PortPool(first, first + 8, slice_size=8, lock_dir=tmp_path)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", first + 1))  # bound on one address: taken for every address
        holder.listen()
        assert [pool.take(1), pool.take(1), pool.take(3), pool.take(2)] == [first, first + 2, first + 3, first + 6]
        # the only slice is walked to its end and no other is free: walk it again from its start
        assert pool.take(1) == first


def test_a_pool_whose_ports_are_all_bound_says_so(tmp_path: Path) -> None:
    first = _ours(2)
    pool = PortPool(first, first + 2, slice_size=2, lock_dir=tmp_path)
    with socket.socket() as one, socket.socket() as two:
        one.bind(("127.0.0.1", first))
        two.bind(("127.0.0.2", first + 1))
        with pytest.raises(RuntimeError, match=f"no block of 1 free ports in {first}-{first + 1} "):
            pool.take(1)


def test_a_slice_held_by_a_process_is_refused_until_it_is_killed(tmp_path: Path) -> None:
    first = _ours(10)
    holder = _taker(first, first + 10, tmp_path, rounds=1)
    try:
        assert holder.stdout is not None and json.loads(holder.stdout.readline()) == list(range(first, first + 6))
        pool = PortPool(first, first + 10, slice_size=10, lock_dir=tmp_path)
        with pytest.raises(RuntimeError, match=f"every slice is locked under {tmp_path}"):
            pool.take(1)
        holder.send_signal(signal.SIGKILL)  # the kernel drops its flock with the process
        holder.wait(timeout=30)
        assert pool.take(1) == first
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.communicate(timeout=30)


def test_a_block_larger_than_a_slice_is_refused(tmp_path: Path) -> None:
    pool = PortPool(30000, 30100, slice_size=50, lock_dir=tmp_path)
    with pytest.raises(ValueError, match="a block of 51 ports does not fit a slice of 50"):
        pool.take(51)
