"""The Ray gate in front of `vllm serve --distributed-executor-backend ray`: it counts the joined Ray nodes
through the engine's own `ray` package and only then becomes the server (same pid); past its timeout it
exits 3 with the count it saw. A stand-in `ray` package (the count in a file) plays the cluster here; the
real one is in tests/integration/test_bigmodels_ray.py."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from orchestra_ops.fleet.ray_gate import gate_argv

FAKE_RAY = '''
from pathlib import Path
import os
_count = Path(os.environ["FAKE_RAY_COUNT"])
_up = [False]
def is_initialized():
    return _up[0]
def init(address, **kwargs):
    if not _count.exists():
        raise ConnectionError("no GCS at " + address)
    _up[0] = True
def nodes():
    return [{"Alive": True}] * int(_count.read_text() or 0) + [{"Alive": False}]
def shutdown():
    _up[0] = False
'''


def _cluster(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    (tmp_path / "pkg" / "ray").mkdir(parents=True)
    (tmp_path / "pkg" / "ray" / "__init__.py").write_text(FAKE_RAY)
    ray = tmp_path / "bin" / "ray"
    ray.parent.mkdir()
    ray.write_text(f"#!{sys.executable}\n")
    ray.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path / "pkg"), "FAKE_RAY_COUNT": str(tmp_path / "count")}
    return ray, env


def test_the_gate_waits_for_every_node_then_becomes_the_server(tmp_path: Path) -> None:
    ray, env = _cluster(tmp_path)
    count = tmp_path / "count"

    def cluster_comes_up() -> None:
        time.sleep(1.0)
        count.write_text("1")  # the head
        time.sleep(1.5)
        count.write_text("2")  # the worker joined

    joiner = threading.Thread(target=cluster_comes_up)
    joiner.start()
    argv = [*gate_argv(str(ray), 2, "10.0.0.1:7000", 60), "sh", "-c", "echo serving as $$"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    joiner.join()
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stderr
    assert lines[0] == "ops-ray-gate: the Ray head at 10.0.0.1:7000 does not answer yet (ConnectionError)"
    assert [line for line in lines if "Ray nodes joined" in line] == [
        "ops-ray-gate: 0 of 2 Ray nodes joined", "ops-ray-gate: 1 of 2 Ray nodes joined",
        "ops-ray-gate: 2 of 2 Ray nodes joined"]
    assert lines[-2:] == ["ops-ray-gate: starting sh", lines[-1]] and lines[-1].startswith("serving as ")


def test_the_gate_gives_up_at_its_timeout_with_the_count_it_saw(tmp_path: Path) -> None:
    ray, env = _cluster(tmp_path)
    (tmp_path / "count").write_text("1")
    argv = [*gate_argv(str(ray), 2, "10.0.0.1:7000", 2), "sh", "-c", "echo never"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 3
    assert done.stdout.splitlines() == ["ops-ray-gate: 1 of 2 Ray nodes joined",
                                        "ops-ray-gate: only 1 of 2 Ray nodes joined within 2 s"]


def test_a_missing_ray_is_named(tmp_path: Path) -> None:
    argv = [*gate_argv(str(tmp_path / "nope" / "ray"), 2, "h:1", 5), "true"]
    done = subprocess.run(argv, env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=30,
                          check=False)
    assert (done.returncode, done.stderr.strip()) == (127, f"ops-ray-gate: command not found: {tmp_path}/nope/ray")
