"""Bring-up of a model through Ray against the same model started alone, on this machine.

The CPU build of vLLM cannot run the Ray executor, so the server is the stand-in of the Ray tests
(tests/raystandin.py: real vLLM parses its argv, the sim serves); what differs between the two rows is what
Ray adds: `ray start --head` (a one-node cluster, `ray:` on a one-host model), the gate that counts its
nodes through Ray, then the server. `ops up` to all READY, ROUNDS times each, alternately, after one
`ops plan --check` of each (so vLLM's argv check is cached for both and timed for neither); the ratio is
Ray's / alone's median. Needs `.venv-ray` (make setup-ray). Never asserts.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench.tables import table
from tests.helpers import REPO, free_port_block, run_ops
from tests.raystandin import RAY_VENV, standin

ROUNDS = int(os.environ.get("BENCH_RAY_ROUNDS", "2"))


def _topology(directory: Path, name: str, vllm: Path, ray: bool) -> Path:
    model: dict[str, Any] = {"model": str(REPO / ".tiny-model" / "model"), "served_model_name": "tiny",
                             "node": "cpu", "gpus_per_replica": 0, "port": free_port_block(1),
                             "engine_args": ["--dtype", "float32", "--enforce-eager"]}
    if ray:
        model["ray"] = {"port": free_port_block(2 + 6 + 8), "worker_ports": 8}
    doc = {"name": name, "defaults": {"ready_timeout_s": 600},
           "nodes": {"cpu": {"host": "localhost", "gpus": 0, "vllm_command": [str(vllm)]}},
           "models": {"m": model}}
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _up_down(directory: Path, topology: Path, name: str) -> float:
    env = {"OPS_HOME": str(directory / "ops-home")}
    started = time.perf_counter()
    result = run_ops(["up", str(topology)], env=env, cwd=directory, timeout=900)
    elapsed = time.perf_counter() - started
    run_ops(["down", name, "--timeout", "15"], env=env, cwd=directory, timeout=300)
    if result.returncode != 0:
        raise SystemExit(f"`ops up {topology}` failed:\n{result.stdout}{result.stderr}")
    return elapsed


def main() -> int:
    if not os.access(RAY_VENV / "bin" / "ray", os.X_OK):
        print("skipped: needs .venv-ray (make setup-ray)")
        return 0
    times: dict[str, list[float]] = {"alone": [], "through Ray (head + gate + server)": []}
    with tempfile.TemporaryDirectory(prefix="bench-bigray-") as tmp:
        directory = Path(tmp)
        vllm = standin(directory)
        env = {"OPS_HOME": str(directory / "ops-home")}
        for ray in (False, True):  # vLLM's check of each command once, outside the timing (ops up caches it)
            warm = _topology(directory, f"bigray-warm-{int(ray)}", vllm, ray)
            run_ops(["plan", "--check", str(warm)], env=env, cwd=directory, timeout=600)
        for index in range(ROUNDS):
            for label, ray in (("alone", False), ("through Ray (head + gate + server)", True)):
                name = f"bigray-{index}-{int(ray)}"
                times[label].append(_up_down(directory, _topology(directory, name, vllm, ray), name))
    alone = statistics.median(times["alone"])
    one, five, _ = os.getloadavg()
    table(f"bring-up of the stand-in server, `ops up` to READY, median of {ROUNDS} (load {one:.1f}, 5 min {five:.1f})",
          ["start", "seconds (each round)", "median", "vs alone"],
          [(label, " ".join(f"{t:.1f}" for t in values), f"{statistics.median(values):.1f}",
            f"{statistics.median(values) / alone:.2f}x") for label, values in times.items()])
    return 0
