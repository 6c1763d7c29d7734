"""The endpoints file: ToolOrchestra's `model_config` JSON, so existing eval scripts use it as is.

    {"Qwen/Qwen3-32B-FP8": [{"ip_addr": "research-secure-12", "port": 1820}, …],
     "retrieval": [{"ip_addr": "research-secure-13", "port": 8765}]}

Keys are served model names (a checkpoint path for a local checkpoint) and service names;
`ip_addr` is a string and `port` an integer. Nothing secret is ever written here. A model bigger than one
server keeps this format: one entry per endpoint (vLLM's internal DP is one entry, external DP one per
rank), never its Ray nodes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypedDict

from orchestra_ops.core.fsutil import atomic_write_text, read_json
from orchestra_ops.core.paths import endpoints_path
from orchestra_ops.errors import ConfigError, LaunchError
from orchestra_ops.fleet.plan import LaunchPlan
from orchestra_ops.fleet.state import FleetState


class Endpoint(TypedDict):
    ip_addr: str
    port: int


Endpoints = dict[str, list[Endpoint]]


def endpoints_for(plan: LaunchPlan) -> Endpoints:
    """The endpoints of every process in the plan, keyed by served model name or service name.

    Two models serving the same name (one model spread over two nodes) share one list. A LoRA
    adapter is one more key listing its base model's replicas (vLLM picks it by the request's model).
    """
    result: Endpoints = {}
    for spec in plan.processes:
        if spec.kind == "gateway" or not spec.serves:  # not a model (the gateway), or a Ray node (not its server)
            continue
        if spec.host is None:
            raise LaunchError(f"{spec.name}: the host of node '{spec.node}' is known only once slurm "
                              "has allocated it (after `ops up`)")
        for key in (spec.endpoint_key, *spec.adapters):
            result.setdefault(key, []).append({"ip_addr": spec.host, "port": spec.port})
    return result


def render_endpoints(endpoints: Endpoints) -> str:
    return json.dumps(endpoints, indent=2) + "\n"


def write_endpoints(path: str | Path, endpoints: Endpoints) -> Path:
    """Write the endpoints file atomically (a reader never sees half a file)."""
    return atomic_write_text(path, render_endpoints(endpoints))


def read_endpoints(path: str | Path) -> Endpoints:
    """Read and check an endpoints file; every problem names the file and the key."""
    source = Path(path)
    raw = read_json(source, error=ConfigError, missing="no such endpoints file")
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: an endpoints file is a JSON object of name -> [{{ip_addr, port}}, …]")
    endpoints: Endpoints = {}
    for key, items in raw.items():
        if not isinstance(items, list) or not items:
            raise ConfigError(f"{source}: {key}: expected a non-empty list of {{ip_addr, port}}")
        entries: list[Endpoint] = []
        for index, item in enumerate(items):
            where = f"{source}: {key}[{index}]"
            if not isinstance(item, dict) or "ip_addr" not in item or "port" not in item:
                raise ConfigError(f"{where}: expected {{\"ip_addr\": …, \"port\": …}}")
            port = item["port"]
            if isinstance(port, str) and port.isdigit():
                port = int(port)  # tolerate hand-written files with string ports
            if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
                raise ConfigError(f"{where}.port: {item['port']!r} is not a port number")
            entries.append({"ip_addr": str(item["ip_addr"]), "port": port})
        endpoints[str(key)] = entries
    return endpoints


def fleet_endpoints(state: FleetState) -> Endpoints | None:
    """The endpoints of every process, keyed by served name or service name (and each declared LoRA
    adapter on its base model's replicas, as endpoints_for does); None while a host is unknown."""
    endpoints: Endpoints = {}
    for record in state.processes:
        if record.kind == "gateway":  # not a model: ToolOrchestra's scripts read every key as one
            continue
        if record.host is None:
            return None
        if not record.serves:  # a Ray node: not an endpoint (one entry per endpoint, as always)
            continue
        for key in (record.endpoint_key, *record.adapters):  # a declared adapter: a key on its base's replicas
            endpoints.setdefault(key, []).append({"ip_addr": record.host, "port": record.port})
    return endpoints


def write_fleet_endpoints(state: FleetState, extra: Path | None = None) -> Path | None:
    endpoints = fleet_endpoints(state)
    if endpoints is None:
        return None
    out = write_endpoints(endpoints_path(state.name), endpoints)
    if extra is not None:
        write_endpoints(extra, endpoints)
    return out
