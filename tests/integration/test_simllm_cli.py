"""`ops serve sim` as a command: bad flags are exit 2 without a traceback, a taken port exit 3."""

from __future__ import annotations

import socket

import pytest

from tests.helpers import free_port, run_ops
from tests.simserver import SimServer


@pytest.mark.parametrize(("flags", "needle"), [
    (["--jitter", "2"], "--jitter"),
    (["--fail", "500:zz"], "--fail"),
    (["--fail", "500:0.7,429:0.5"], "sum"),
    (["--latency-ms", "-1"], "--latency-ms"),
    (["--crash-after", "0"], "--crash-after"),
    (["--bogus"], "--bogus"),
])
def test_bad_flags_exit_2(flags: list[str], needle: str) -> None:
    result = run_ops(["serve", "sim", "--port", str(free_port()), "--model", "m", *flags], timeout=30)
    assert result.returncode == 2, result.stderr
    assert needle in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_model_exits_2() -> None:
    result = run_ops(["serve", "sim", "--port", str(free_port())], timeout=30)
    assert result.returncode == 2 and "--model" in result.stderr


def test_taken_port_exits_3() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", free_port()))
        sock.listen()
        port = sock.getsockname()[1]
        result = run_ops(["serve", "sim", "--port", str(port), "--model", "m"], timeout=30)
    assert result.returncode == 3, result.stderr
    assert "cannot listen" in result.stderr and "Traceback" not in result.stderr


def test_help_lists_sim() -> None:
    assert "sim" in run_ops(["serve", "--help"], timeout=30).stdout
    assert "--crash-after" in run_ops(["serve", "sim", "--help"], timeout=30).stdout


def test_start_line_names_port_model_and_gpus() -> None:
    with SimServer(model="cv-model", env={"CUDA_VISIBLE_DEVICES": "1,3"}) as sim:
        log = sim.log_tail()
    assert f"port={sim.port}" in log and "model=cv-model" in log and "CUDA_VISIBLE_DEVICES=1,3" in log
