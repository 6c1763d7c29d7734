"""What the real-vLLM benchmarks share: whether the engine is here, a copy of topologies/vllm_cpu.yaml with free
ports (and absolute paths, so it runs from any directory), and `ops up` / `ops down` of it."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import REPO, free_port_block, run_ops

VLLM = REPO / ".venv-vllm" / "bin" / "vllm"
MODEL = REPO / ".tiny-model" / "model"


def missing() -> str | None:
    """Why the real-vLLM benchmarks cannot run here (None: they can)."""
    if not VLLM.is_file() or not (MODEL / "config.json").is_file():
        return "needs .venv-vllm/bin/vllm and .tiny-model/model (make setup tiny-model)"
    return None


def write_topology(directory: Path, name: str, replicas: int, **model_extra: Any) -> Path:
    """topologies/vllm_cpu.yaml: `replicas` replicas of the tiny model on free ports, no retrieval service."""
    doc = yaml.safe_load((REPO / "topologies" / "vllm_cpu.yaml").read_text())
    doc["name"] = name
    doc["nodes"]["cpu"]["vllm_command"] = [str(VLLM)]
    doc.pop("services", None)
    model = doc["models"]["tiny"]
    model.update(model=str(MODEL), tokenizer=str(MODEL), replicas=replicas, port=free_port_block(replicas),
                 **model_extra)
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def up(directory: Path, topology: Path) -> tuple[float, str]:
    """`ops up` from the shell's point of view: seconds until it returned (all READY), and its output."""
    started = time.perf_counter()
    result = run_ops(["up", str(topology)], env={"OPS_HOME": str(directory / "ops-home")}, cwd=directory,
                     timeout=900)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        print(f"`ops up {topology}` failed:\n{result.stdout}{result.stderr}", file=sys.stderr)
        raise SystemExit(1)
    return elapsed, result.stdout + result.stderr


def down(directory: Path, name: str) -> None:
    run_ops(["down", name, "--timeout", "15"], env={"OPS_HOME": str(directory / "ops-home")}, cwd=directory,
            timeout=300)
