"""Bring-up through the slurm and ssh backends: 8 sim replicas with a 3 s startup delay each.

Starts the dev cluster (tests/devcluster.py: munged, slurmctld, slurmd, sshd on 127.0.0.2; needs
root) and reports, per backend, the seconds from running `ops up` to its return (all READY)
against the 3 s the slowest replica needs by itself (target: at most 1.5x), with the local backend
as the same-run baseline; then how many squeue/scontrol calls `ops` made per minute while waiting:
during that bring-up, and while a job stays PENDING for a minute (its GPUs held by another job).
The calls are counted from outside, by wrappers first on PATH. Never asserts; returns 0.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from tests.devcluster import PARTITION, DevCluster
from tests.helpers import free_port_block, run_ops

REPLICAS = 8
STARTUP_DELAY_S = 3.0
TARGET_RATIO = 1.5
PENDING_S = 60.0
OPS_COMMAND = [sys.executable, "-m", "orchestra_ops"]


def _counting_path(directory: Path, count_file: Path) -> str:
    """A PATH whose squeue/scontrol/sbatch/scancel append their name to `count_file`, then run the real one."""
    shims = directory / "shims"
    shims.mkdir()
    for name in ("squeue", "scontrol", "sbatch", "scancel"):
        real = subprocess.run(["which", name], capture_output=True, text=True, check=True).stdout.strip()
        shim = shims / name
        shim.write_text(f"#!/bin/sh\necho {name} >> {count_file}\nexec {real} \"$@\"\n")
        shim.chmod(0o755)
    return f"{shims}:{os.environ['PATH']}"


def _topology(directory: Path, name: str, node: dict[str, Any], gpus_per_replica: int = 0,
              replicas: int = REPLICAS) -> Path:
    body = {"name": name, "defaults": {"ulimit_nofile": 4096, "ready_timeout_s": 300, "ops_command": OPS_COMMAND},
            "nodes": {"n": node},
            "models": {"m": {"model": "sim/bench", "engine": "sim", "node": "n", "replicas": replicas,
                             "gpus_per_replica": gpus_per_replica, "port": free_port_block(replicas),
                             "sim": {"latency_ms": 1, "startup_delay_s": STARTUP_DELAY_S}}}}
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def _calls(count_file: Path) -> dict[str, int]:
    names = count_file.read_text().split() if count_file.exists() else []
    return {name: names.count(name) for name in ("squeue", "scontrol", "sbatch", "scancel")}


def _queue_wait(cluster: DevCluster, state_file: Path) -> float | None:
    """Seconds slurmctld took from accepting the job to allocating its node (from its log, ms precision)."""
    try:
        job = json.loads(state_file.read_text())["nodes"][0]["handle"]["job_id"]
        log = (cluster.root / "slurm" / "log" / "slurmctld.log").read_text()
    except (OSError, KeyError, IndexError, ValueError):
        return None
    stamps = {}
    for kind, pattern in (("submit", f"_slurm_rpc_submit_batch_job: JobId={job} "),
                          ("allocate", f"sched: Allocate JobId={job} ")):
        match = re.search(r"^\[([0-9T:.-]+)\] " + re.escape(pattern), log, re.M)
        if match is None:
            return None
        stamps[kind] = datetime.fromisoformat(match.group(1)).timestamp()
    return stamps["allocate"] - stamps["submit"]


def _bring_up(directory: Path, env: dict[str, str], topology: Path, count_file: Path
              ) -> tuple[float | None, float | None, dict[str, int]]:
    """(seconds `ops up` took, seconds it reports waiting for readiness, slurm calls during it)."""
    count_file.unlink(missing_ok=True)
    started = time.perf_counter()
    result = run_ops(["up", str(topology)], env=env, cwd=directory, timeout=600)
    elapsed = time.perf_counter() - started
    calls = _calls(count_file)
    run_ops(["down", topology.stem, "--timeout", "10"], env=env, cwd=directory, timeout=300)
    if result.returncode != 0:
        print(f"`ops up` of {topology.stem} failed:\n{result.stderr}", file=sys.stderr)
        return None, None, calls
    match = re.search(r"ready in ([0-9.]+) s", result.stderr)
    return elapsed, float(match.group(1)) if match else None, calls


def _pending_minute(directory: Path, env: dict[str, str], cluster: DevCluster, count_file: Path) -> dict[str, int]:
    """Slurm calls while a job waits PENDING_S for GPUs another job holds."""
    hold = subprocess.run(["sbatch", "--parsable", "--gres=gpu:4", "-o", "/dev/null", "--wrap", "sleep 600"],
                          capture_output=True, text=True, env={**os.environ, **cluster.env}, check=True).stdout.strip()
    try:
        node = {"slurm": {"partition": PARTITION, "gpus": 1, "time": "0:10:00"}, "bind": cluster.node_address}
        topology = _topology(directory, "bench-pending", node, gpus_per_replica=1, replicas=1)
        count_file.unlink(missing_ok=True)
        run_ops(["up", str(topology), "--timeout", str(PENDING_S)], env=env, cwd=directory, timeout=600)
        return _calls(count_file)
    finally:
        subprocess.run(["scancel", hold], env={**os.environ, **cluster.env}, check=False)


def main() -> int:
    reason = DevCluster.unavailable()
    if reason:
        print(f"skipped: the dev cluster {reason}")
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        directory = Path(tmp)
        cluster = DevCluster(directory / "cluster").start()
        try:
            count_file = directory / "slurm-calls"
            env = {"OPS_HOME": str(directory / "ops-home"), **cluster.env,
                   "PATH": _counting_path(directory, count_file)}
            load = os.getloadavg()[0]
            local = _bring_up(directory, env, _topology(directory, "bench-local", {"host": "localhost"}), count_file)
            slurm_node = {"slurm": {"partition": PARTITION, "gpus": 0, "time": "0:10:00"}, "bind": cluster.node_address}
            slurm = _bring_up(directory, env, _topology(directory, "bench-slurm", slurm_node), count_file)
            queued = _queue_wait(cluster, directory / "ops-home" / "bench-slurm" / "state.json")
            ssh_node = {"host": cluster.ssh_address, "bind": cluster.ssh_address,
                        "ssh": {"port": cluster.ssh_port, "identity_file": str(cluster.identity_file),
                                "known_hosts": str(cluster.known_hosts), "tmux_socket": "ops-bench"}}
            ssh = _bring_up(directory, env, _topology(directory, "bench-ssh", ssh_node), count_file)
            pending = _pending_minute(directory, env, cluster, count_file)
        finally:
            subprocess.run(["tmux", "-L", "ops-bench", "kill-server"], capture_output=True, check=False)
            cluster.stop()
    rows = []
    for label, (elapsed, waited, _) in (("local", local), ("slurm (sbatch, 1 job)", slurm),
                                        ("ssh (127.0.0.2, tmux)", ssh)):
        if elapsed is None:
            rows.append((f"ops up, {REPLICAS} replicas, {label}", "failed", "", ""))
            continue
        rows.append((f"ops up, {REPLICAS} replicas, {label}", f"{elapsed:.2f} s",
                     f"{elapsed / STARTUP_DELAY_S:.2f}x", "-" if waited is None else f"{waited:.2f} s"))
    if slurm[0] is not None and queued is not None:
        mine = slurm[0] - queued
        rows.insert(2, ("  the same without slurm's own queue time", f"{mine:.2f} s", f"{mine / STARTUP_DELAY_S:.2f}x",
                        f"(slurmctld took {queued:.2f} s from submit to allocation)"))
    rows.append(("slowest replica by itself (startup delay)", f"{STARTUP_DELAY_S:.2f} s", "1.00x", ""))
    width = max(len(row[0]) for row in rows)
    print(f"{'':<{width}}  {'to READY':>9}  {'ratio':>6}  waiting (as ops reports it)")
    for label, seconds, ratio, waited_text in rows:
        print(f"{label:<{width}}  {seconds:>9}  {ratio:>6}  {waited_text}")
    print(f"(target: at most {TARGET_RATIO}x the slowest replica's startup; `ops up` includes the interpreter, "
          "the checks of every node and the launch)")
    up_calls, up_s = slurm[2], slurm[0] or 0.0
    polls = up_calls["squeue"] + up_calls["scontrol"]
    print(f"\nslurm calls during the slurm bring-up ({up_s:.1f} s): {up_calls}; "
          f"squeue+scontrol: {polls} = {60 * polls / up_s if up_s else 0:.0f}/min")
    waits = pending["squeue"] + pending["scontrol"]
    print(f"slurm calls while a job stayed PENDING for {PENDING_S:.0f} s: {pending}; squeue+scontrol: {waits} "
          f"= {60 * waits / PENDING_S:.1f}/min")
    print(f"(load average at start: {load:.2f} on {os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
