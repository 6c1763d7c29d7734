"""Fixtures of the slurm/ssh tests: a real dev cluster per module and a harness per test.

`cluster_fixture(slurm=…, sshd=…)` makes a module-scoped fixture that starts the daemons the module
needs (tests/devcluster.py: munged, slurmctld, slurmd with 4 fake GPUs; sshd on 127.0.0.2), skips
with the reason when they cannot run here (not root, not installed), and stops them by pid.
`ClusterHarness` writes topologies whose nodes are those daemons, runs `ops` with OPS_HOME and
SLURM_CONF set, and after each test runs `ops down` and checks that nothing it started is left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from orchestra_ops.core.procs import listeners
from tests.devcluster import PARTITION, DevCluster
from tests.helpers import free_port_block, kill_tree, run_ops, still_ours

OPS_COMMAND = [sys.executable, "-m", "orchestra_ops"]  # on the "remote" node too: it is this machine


def cluster_fixture(*, slurm: bool, sshd: bool) -> Callable[..., Iterator[DevCluster]]:
    @pytest.fixture(scope="module")
    def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
        reason = DevCluster.unavailable()
        if reason:
            pytest.skip(f"real slurm/sshd tests: {reason}")
        dev = DevCluster(tmp_path_factory.mktemp("cluster")).start(slurm=slurm, sshd=sshd)
        try:
            yield dev
        finally:
            left = dev.stop()
            assert left == [], f"dev cluster daemons still running: {left}"

    return cluster


class ClusterHarness:
    """One OPS_HOME and one private tmux socket per test; `cleanup` stops whatever is left."""

    def __init__(self, tmp_path: Path, cluster: DevCluster) -> None:
        self.cwd = tmp_path
        self.cluster = cluster
        self.home = tmp_path / "ops-home"
        self.socket = f"ops-test-{uuid.uuid4().hex[:10]}"
        self.env = {"OPS_HOME": str(self.home), **cluster.env}

    # ---- nodes and topologies ---------------------------------------------------------------------

    def slurm_node(self, gpus: int = 4, **extra: Any) -> dict[str, Any]:
        return {"slurm": {"partition": PARTITION, "gpus": gpus, "time": "0:30:00", **extra},
                "bind": self.cluster.node_address}

    def ssh_node(self, **ssh: Any) -> dict[str, Any]:
        settings = {"port": self.cluster.ssh_port, "identity_file": str(self.cluster.identity_file),
                    "known_hosts": str(self.cluster.known_hosts), "tmux_socket": self.socket, **ssh}
        return {"host": self.cluster.ssh_address, "bind": self.cluster.ssh_address, "ssh": settings}

    @staticmethod
    def local_node() -> dict[str, Any]:
        return {"host": "localhost", "gpus": 0}

    @staticmethod
    def sim(node: str, replicas: int = 2, gpus_per_replica: int = 0, **extra: Any) -> dict[str, Any]:
        sim = {"latency_ms": 1, **extra.pop("sim", {})}
        return {"model": f"sim/{node}-{uuid.uuid4().hex[:4]}", "engine": "sim", "node": node, "replicas": replicas,
                "gpus_per_replica": gpus_per_replica, "port": free_port_block(replicas), "sim": sim, **extra}

    def topology(self, name: str, nodes: dict[str, Any], models: dict[str, Any], **defaults: Any) -> Path:
        body = {"name": name,
                "defaults": {"ulimit_nofile": 4096, "ready_timeout_s": 120, "ops_command": OPS_COMMAND, **defaults},
                "nodes": nodes, "models": models}
        path = self.cwd / f"{name}.yaml"
        path.write_text(yaml.safe_dump(body, sort_keys=False))
        return path

    # ---- running ops ------------------------------------------------------------------------------

    def ops(self, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        return run_ops(list(args), env=self.env, cwd=self.cwd, timeout=timeout)

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([*OPS_COMMAND, *args], cwd=self.cwd, env={**os.environ, **self.env},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def state(self, name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.home / name / "state.json").read_text())
        return data

    def endpoints(self, name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.home / name / "model_config.json").read_text())
        return data

    def has_session(self, session: str) -> bool:
        result = subprocess.run(["tmux", "-L", self.socket, "has-session", "-t", f"={session}"],
                                capture_output=True, check=False)
        return result.returncode == 0

    # ---- what is running --------------------------------------------------------------------------

    @staticmethod
    def servers(ports: list[int]) -> dict[int, psutil.Process]:
        """The process listening on each port (same machine: the 'remote' and the slurm node are here)."""
        found = {}
        for port, holder in listeners(ports).items():
            if holder.pid is not None:
                found[port] = psutil.Process(holder.pid)
        return found

    def cleanup(self) -> None:
        for state_file in self.home.glob("*/state.json") if self.home.is_dir() else []:
            self.ops("down", state_file.parent.name, "--timeout", "5")
            for record in json.loads(state_file.read_text()).get("processes", []):
                if record.get("backend") in ("local", "tmux") and still_ours(record):
                    kill_tree(record["pid"])
        if self.cluster.slurm_conf.exists() and self.cluster.node_state().startswith(("drain", "down")):
            self.cluster.resume()
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, check=False)
        tmux_dir = Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}"
        (tmux_dir / self.socket).unlink(missing_ok=True)


def alive(procs: list[psutil.Process]) -> list[int]:
    out = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc.pid)
        except psutil.NoSuchProcess:
            continue
    return out


@pytest.fixture
def harness(cluster: DevCluster, tmp_path: Path) -> Iterator[ClusterHarness]:
    h = ClusterHarness(tmp_path, cluster)
    try:
        yield h
    finally:
        h.cleanup()
