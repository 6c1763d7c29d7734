"""A topology over servers the test started itself (sims, fake replicas), and its endpoints file under
OPS_HOME, as `ops up` would leave them: what `ops serve gateway --topology FILE` routes over."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

SERVED = "answer-model"
CHECKPOINT = "/ckpt/answer-v1"


def write_fleet(root: Path, ports: Sequence[int], *, name: str = "gwtest",
                providers: Mapping[str, Mapping[str, Any]] | None = None,
                request_defaults: Mapping[str, Any] | None = None, extra: Mapping[str, Any] | None = None) -> Path:
    """`root/topology.yaml` with one model `answer` (served as answer-model) on `ports` (consecutive
    or not: the endpoints file lists each), role `solver` -> answer, and `root/ops/<name>/model_config.json`.
    Use OPS_HOME=root/ops. Returns the topology file."""
    topology: dict[str, Any] = {
        "name": name,
        "nodes": {"cpu": {"host": "localhost", "gpus": 0}},
        "models": {"answer": {"model": CHECKPOINT, "served_model_name": SERVED, "engine": "sim", "node": "cpu",
                              "replicas": 1, "gpus_per_replica": 0, "port": ports[0],
                              "request_defaults": dict(request_defaults or {})}},
        "providers": {k: dict(v) for k, v in (providers or {}).items()},
        "roles": {"solver": "answer", **{f"{k}-role": k for k in providers or {}}},
        **dict(extra or {}),
    }
    path = root / "topology.yaml"
    path.write_text(yaml.safe_dump(topology, sort_keys=False))
    endpoints = {SERVED: [{"ip_addr": "127.0.0.1", "port": port} for port in ports]}
    out = root / "ops" / name / "model_config.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(endpoints))
    return path


def write_model_config(root: Path, ports: Sequence[int], model: str = "m") -> Path:
    path = root / "fleet.json"  # the gateway names its run dir after it: runs/gateway-fleet
    path.write_text(json.dumps({model: [{"ip_addr": "127.0.0.1", "port": port} for port in ports]}))
    return path


def profile_lines(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "profile.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
