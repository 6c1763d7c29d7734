"""Where routing comes from: `--topology T` (a file, or the name of a topology that is up),
`--model-config FILE` (an endpoints file), or neither (the most recent topology that is up)."""

from __future__ import annotations

from pathlib import Path

from orchestra_ops.client.routing import Routing, from_model_config, from_topology
from orchestra_ops.config.loader import load_topology
from orchestra_ops.core.paths import endpoints_path, latest_topology_name, state_path
from orchestra_ops.errors import ConfigError, StateError
from orchestra_ops.fleet.endpoints import read_endpoints
from orchestra_ops.fleet.lora.loaded import runtime_adapter_paths, runtime_adapters
from orchestra_ops.fleet.state import read_state


def load_routing(topology: str | None = None, model_config: str | None = None) -> Routing:
    if topology and model_config:
        raise ConfigError("give --topology or --model-config, not both")
    if model_config:
        path = Path(model_config)
        return from_model_config(read_endpoints(path), source=str(path), name=_config_name(path))
    if topology and Path(topology).is_file():
        topo = load_topology(topology)
        source = topology
    else:
        name = topology or latest_topology_name()
        if name is None:
            raise StateError("no topology is up; pass --topology FILE, or --model-config FILE for servers "
                             "started some other way, or run `ops up TOPOLOGY` first")
        source = _topology_file_from_state(name)
        topo = load_topology(source)
    endpoints_file = endpoints_path(topo.name)
    if not endpoints_file.is_file():
        raise StateError(f"{endpoints_file}: no endpoints file for topology '{topo.name}'; run `ops up "
                         f"{source}` first (or pass --model-config FILE)")
    return from_topology(topo, read_endpoints(endpoints_file), source=source, endpoints_file=str(endpoints_file),
                         adapters=runtime_adapters(topo.name), adapter_paths=runtime_adapter_paths(topo.name),
                         workdir=_fleet_workdir(topo.name))


def _fleet_workdir(name: str) -> str | None:
    """Where `ops up` started the fleet (relative model and adapter paths are from there), if it is recorded."""
    try:
        return read_state(name).cwd if state_path(name).is_file() else None
    except StateError:
        return None


def _topology_file_from_state(name: str) -> str:
    path = state_path(name)
    if not path.is_file():
        raise StateError(f"'{name}' is neither a topology file nor a topology that is up ({path} does not "
                         "exist); run `ops up TOPOLOGY` first")
    state = read_state(name)
    if state.status == "down":
        raise StateError(f"topology '{name}' is down; run `ops up {state.topology_file}` first")
    return state.topology_file


def _config_name(path: Path) -> str:
    """A name for default run dirs: `.ops/<name>/model_config.json` -> name, else the file's stem."""
    if path.name == "model_config.json" and path.parent.name:
        return path.parent.name
    return path.stem
