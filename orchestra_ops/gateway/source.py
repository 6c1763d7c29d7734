"""What the gateway routes to: a topology that is up (its endpoints file and runtime adapters), or an
endpoints file alone; re-read when those files change (a replica restarted, an adapter loaded).

`identities(routing)` says what each name stands for in the response cache's key: a model's
checkpoint (its path or hub id), an adapter's directory and the sha256 of its files, a provider's
URL and model, never the served name alone (a new checkpoint under an old name gets no old answers).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from orchestra_ops.client.routing import Routing, from_model_config
from orchestra_ops.client.sources import load_routing
from orchestra_ops.config.loader import load_topology
from orchestra_ops.config.topology import Topology
from orchestra_ops.core.paths import endpoints_path
from orchestra_ops.errors import ConfigError
from orchestra_ops.fleet.endpoints import read_endpoints
from orchestra_ops.fleet.lora.loaded import records_path, runtime_adapter_paths


@dataclass(frozen=True)
class RoutingSource:
    """`--topology FILE|NAME` (default: the latest topology up) or `--model-config FILE`."""

    topology: str | None = None
    model_config: str | None = None

    def load(self) -> Routing:
        if self.model_config:
            path = Path(self.model_config)
            return from_model_config(read_endpoints(path), source=str(path), name=path.stem if path.name !=
                                     "model_config.json" else path.parent.name or path.stem)
        return load_routing(self.topology, None)

    def watched(self, routing: Routing) -> list[Path]:
        """The files whose change means the routing may have changed."""
        if self.model_config:
            return [Path(self.model_config)]
        return [endpoints_path(routing.name), records_path(routing.name)]

    def topology_of(self, routing: Routing) -> Topology | None:
        if self.model_config:
            return None
        return load_topology(routing.source)


def signature(paths: list[Path]) -> tuple[tuple[str, float, int], ...]:
    """(path, mtime, size) of each file that exists: compared between polls to see a change."""
    out = []
    for path in paths:
        try:
            stat = path.stat()
        except OSError:
            continue
        out.append((str(path), stat.st_mtime, stat.st_size))
    return tuple(out)


def identities(routing: Routing, topology: Topology | None) -> dict[str, str]:
    """target key -> what it stands for (see the module doc). Needs the topology (`--cache` refuses
    `--model-config`: an endpoints file says nothing about checkpoints)."""
    if topology is None:
        raise ConfigError("--cache needs a topology (--topology NAME|FILE): the cache key is what each model name "
                          "stands for (checkpoint, adapter files), which an endpoints file does not say")
    runtime = runtime_adapter_paths(routing.name)  # adapters loaded at run time: their directories
    out: dict[str, str] = {}
    for key, target in routing.targets.items():
        if target.kind == "provider":
            out[key] = f"provider:{target.base_url}:{target.served_name}"
        elif target.adapter_of:
            base = routing.targets[target.adapter_of]
            declared = topology.models[target.adapter_of].lora_modules.get(key) if target.adapter_of in \
                topology.models else None
            where = declared or runtime.get(key)
            digest = files_digest(Path(where)) if where else "unknown"
            out[key] = f"adapter:{base.checkpoint}:{where}:{digest}"
        else:
            out[key] = f"model:{target.checkpoint or target.served_name}"
    return out


def files_digest(directory: Path) -> str:
    """sha256 over the names and bytes of every file under `directory` (an adapter is a few files)."""
    digest = hashlib.sha256()
    if not directory.is_dir():
        return "missing"
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            digest.update(str(path.relative_to(directory)).encode() + b"\0")
            with open(path, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()
