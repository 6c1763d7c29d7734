"""`ops lora load/unload/list`: adapters in and out of running replicas, all or none.

load:   checks (the fleet is up, the model takes runtime adapters, the name is free, the directory
        is one vLLM would serve) -> what each replica serves under the name (/v1/models): one that
        serves it from the same directory is adopted, one that serves it from another is refused
        -> POST /v1/load_lora_adapter to every other replica of the model at once (loading.py), all
        within the time limit -> each must answer 200 *and* list the adapter in /v1/models -> if one
        does not, or does not answer in time, or a signal arrives, every replica that took it (or
        may have) unloads it again, and the error says which replica refused and why and what is
        served after the rollback -> lora.json and the endpoints file (the adapter's key lists the
        model's replicas).
unload: POST /v1/unload_lora_adapter to every replica of the model (404: it was not there) ->
        /v1/models must no longer list it -> the key leaves the endpoints file and lora.json.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from orchestra_ops.config.adapter_dir import DEFAULT_MAX_LORA_RANK, inspect_adapter
from orchestra_ops.config.loader import load_topology
from orchestra_ops.config.lora_checks import name_problem, names_in_use
from orchestra_ops.config.topology import Topology
from orchestra_ops.core.paths import endpoints_path
from orchestra_ops.errors import ConfigError, Interrupted, LaunchError, StateError
from orchestra_ops.fleet.endpoints import read_endpoints, write_endpoints
from orchestra_ops.fleet.lora.calls import ReplicaOutcome, each, model_cards, unload_one
from orchestra_ops.fleet.lora.loaded import LoadedAdapter, ReplicaRef, locked, read_records, write_records
from orchestra_ops.fleet.lora.loading import SURVEY_TIMEOUT_S, load_or_roll_back, refusal, same_dir, survey
from orchestra_ops.fleet.state import FleetState, ProcessRecord, read_state, resolve_name

LOAD_TIMEOUT_S = 300.0  # a real replica reads the weights from disk before it answers


@dataclass
class LoraReport:
    action: str  # load | unload
    adapter: str
    model: str
    served_name: str
    path: str | None
    rank: int | None
    outcomes: list[ReplicaOutcome]
    endpoints_file: str
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "adapter": self.adapter, "model": self.model, "served_name": self.served_name,
                "path": self.path, "rank": self.rank, "replicas": [o.to_json() for o in self.outcomes],
                "endpoints_file": self.endpoints_file, "notes": self.notes}


@dataclass
class _Fleet:
    state: FleetState
    topology: Topology
    endpoints_file: Path

    def replicas(self, model: str) -> list[ProcessRecord]:
        return [r for r in self.state.processes if r.group == model]

    def static_owner(self, name: str) -> str | None:
        return next((key for key, m in self.topology.models.items() if name in m.lora_modules), None)


def _open(topology: str | None) -> _Fleet:
    state = read_state(resolve_name(topology))
    if state.status != "up":
        raise StateError(f"topology '{state.name}' is down; `ops up {state.topology_file}` first")
    topo = load_topology(state.topology_file)
    endpoints_file = Path(state.endpoints_file) if state.endpoints_file else endpoints_path(state.name)
    if not endpoints_file.is_file():
        raise StateError(f"{endpoints_file}: no endpoints file yet; `ops up` writes it once every process serves")
    return _Fleet(state, topo, endpoints_file)


def _pick_model(fleet: _Fleet, wanted: str | None) -> str:
    topo = fleet.topology
    if wanted:
        key = wanted if wanted in topo.models else next(
            (k for k, m in topo.models.items() if m.served_name == wanted), None)
        if key is None and topo.roles.get(wanted) in topo.models:
            key = topo.roles[wanted]
        if key is None:
            raise ConfigError(f"--model {wanted}: no such model in {fleet.state.topology_file} "
                              f"(models: {', '.join(topo.models) or 'none'})")
    else:
        takers = [k for k, m in topo.models.items() if m.runtime_lora]
        if len(takers) != 1:
            what = f"models taking them: {', '.join(takers)}" if takers else "no model has runtime_lora: true"
            raise ConfigError(f"give --model MODEL: which model should serve the adapter? ({what})")
        key = takers[0]
    if not topo.models[key].runtime_lora:
        raise ConfigError(f"models.{key} does not take runtime adapters: vLLM serves /v1/load_lora_adapter only "
                          f"with VLLM_ALLOW_RUNTIME_LORA_UPDATING; set runtime_lora: true for it in "
                          f"{fleet.state.topology_file} and `ops up --replace`, or declare the adapter in "
                          "lora_modules")
    if not fleet.replicas(key):
        raise StateError(f"topology '{fleet.state.name}' runs no replica of '{key}'")
    return key


def load_adapter(name: str, path: str, *, model: str | None = None, topology: str | None = None,
                 timeout_s: float = LOAD_TIMEOUT_S) -> LoraReport:
    """Load adapter `name` from `path` into every replica of a running model, or into none (see the module
    doc); everything (the lock, the survey, the loads) within `timeout_s`. A replica that already serves
    `name` from `path` is adopted as it is; one that serves it from another directory is refused."""
    deadline = time.monotonic() + timeout_s
    fleet = _open(topology)
    key = _pick_model(fleet, model)
    spec = fleet.topology.models[key]
    owner = fleet.static_owner(name)
    problem = name_problem(name, names_in_use(fleet.topology), owner)
    if problem:
        raise ConfigError(f"adapter name: {problem}")
    absolute = str(Path(path).expanduser().absolute())
    rank = _check_directory(fleet, key, absolute)
    with locked(fleet.state.name, _left(deadline)):
        records = read_records(fleet.state)
        if name in records and not same_dir(records[name].path, absolute):
            raise ConfigError(f"'{name}' is already loaded into {records[name].model} from {records[name].path}; "
                              f"`ops lora unload {name}` first")
        replicas = fleet.replicas(key)
        adopted = _adoptable(replicas, name, absolute, key, min(_left(deadline), SURVEY_TIMEOUT_S))
        todo = [r for r in replicas if r.name not in adopted]
        attempt = load_or_roll_back(todo, name, absolute, _left(deadline))
        loaded = dict(zip((r.name for r in todo), attempt.outcomes, strict=False))
        outcomes = [loaded.get(r.name) or adopted.get(r.name) or _unasked(r) for r in replicas]
        report = LoraReport("load", name, key, spec.served_name, absolute, rank, outcomes, str(fleet.endpoints_file))
        if not attempt.ok:
            left = [r for r in replicas if r.name in adopted] + attempt.stuck()
            if left:  # what may still serve it, so `ops lora unload` finds it
                records[name] = LoadedAdapter(name, key, absolute, time.time(), _refs(fleet.state, left), partial=True)
                write_records(fleet.state.name, records)
            elif records.pop(name, None) is not None:
                write_records(fleet.state.name, records)
            message = refusal(name, key, attempt, list(adopted))
            if attempt.signal:
                raise Interrupted(message)
            raise LaunchError(message)
        records[name] = LoadedAdapter(name, key, absolute, time.time(), _refs(fleet.state, replicas))
        endpoints = read_endpoints(fleet.endpoints_file)
        endpoints[name] = [{"ip_addr": r.host, "port": r.port} for r in replicas if r.host is not None]
        write_endpoints(fleet.endpoints_file, endpoints)
        write_records(fleet.state.name, records)
    return report


def _left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.001)


def _adoptable(replicas: list[ProcessRecord], name: str, path: str, key: str,
               timeout_s: float) -> dict[str, ReplicaOutcome]:
    """replica name -> an ok outcome for each replica that serves `name` from `path` already; a replica that
    serves it from elsewhere, or cannot say, stops the load before anything is loaded."""
    adopted: dict[str, ReplicaOutcome] = {}
    for served in survey(replicas, name, timeout_s):
        record = served.replica
        if served.error:
            raise LaunchError(f"cannot load '{name}' into {key}: {record.name} ({record.host}:{record.port}): "
                              f"{served.error}; nothing was loaded")
        if served.root is None:
            continue
        if not same_dir(served.root, path):
            raise ConfigError(f"'{name}' is already served by {record.name} from {served.root}, not {path}; "
                              f"`ops lora unload {name} --model {key}` first")
        adopted[record.name] = ReplicaOutcome(record.name, f"{record.host}:{record.port}", True, None,
                                              f"already serves '{name}' from {path}: adopted")
    return adopted


def _unasked(record: ProcessRecord) -> ReplicaOutcome:
    return ReplicaOutcome(record.name, f"{record.host}:{record.port}", False, None, "not asked (interrupted)")


def unload_adapter(name: str, *, model: str | None = None, topology: str | None = None,
                   timeout_s: float = 60.0) -> LoraReport:
    """Unload adapter `name` from every replica of its model; it leaves the endpoints file either way.
    Everything (the lock, the unloads) within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    fleet = _open(topology)
    owner = fleet.static_owner(name)
    if owner is not None:
        raise ConfigError(f"'{name}' is declared in models.{owner}.lora_modules of {fleet.state.topology_file}; "
                          "remove it there and `ops up --replace` (a restart would load it again)")
    with locked(fleet.state.name, _left(deadline)):
        records = read_records(fleet.state)
        entry = records.get(name)
        if entry is None and not model:
            loaded = ", ".join(sorted(records)) or "none"
            raise ConfigError(f"no adapter '{name}' was loaded with `ops lora load` into '{fleet.state.name}' "
                              f"(loaded: {loaded}); give --model MODEL to unload it from every replica anyway")
        key = entry.model if entry is not None else _pick_model(fleet, model)
        replicas = fleet.replicas(key)
        outcomes = asyncio.run(each(replicas, _left(deadline), lambda c, r: unload_one(c, r, name)))
        endpoints = read_endpoints(fleet.endpoints_file)
        if endpoints.pop(name, None) is not None:
            write_endpoints(fleet.endpoints_file, endpoints)
        failed = [r for r, o in zip(replicas, outcomes, strict=True) if not o.ok]
        records.pop(name, None)
        if failed:
            path = entry.path if entry else "?"
            records[name] = LoadedAdapter(name, key, path, time.time(), _refs(fleet.state, failed), partial=True)
        write_records(fleet.state.name, records)
    report = LoraReport("unload", name, key, fleet.topology.models[key].served_name, entry.path if entry else None,
                        None, outcomes, str(fleet.endpoints_file))
    if failed:
        lines = [f"'{name}' is out of {fleet.endpoints_file}, but {len(failed)} replica(s) may still serve it:"]
        lines += [f"  {o.replica} ({o.address}): {o.message}" for o in outcomes if not o.ok]
        lines.append(f"`ops lora unload {name}` again once they answer (a restart drops it too)")
        raise LaunchError("\n".join(lines))
    return report


def _check_directory(fleet: _Fleet, key: str, path: str) -> int | None:
    spec = fleet.topology.models[key]
    node = fleet.topology.nodes.get(spec.node)
    if node is not None and not node.is_local and not Path(path).exists():
        return None  # on that node's own disk: the replicas say whether it is there
    max_rank = spec.max_lora_rank or DEFAULT_MAX_LORA_RANK
    info = inspect_adapter(path, max_rank)
    if any(p.kind == "missing" for p in info.problems):
        raise ConfigError(f"no such adapter directory: {path}")
    if info.problems:
        hint = ", vLLM's default" if spec.max_lora_rank is None else ""
        lines = [f"{path}: vLLM would refuse this adapter for models.{key} (max_lora_rank {max_rank}{hint}):"]
        lines += [f"  {p.message}" for p in info.problems]
        raise ConfigError("\n".join(lines))
    return info.rank


def _refs(state: FleetState, replicas: list[ProcessRecord]) -> list[ReplicaRef]:
    return [ReplicaRef.of(state, r) for r in replicas]


@dataclass(frozen=True)
class ReplicaAdapters:
    """What one replica serves now, from its /v1/models (`error` when it did not answer)."""

    replica: str
    model: str
    address: str
    adapters: list[str]
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"replica": self.replica, "model": self.model, "address": self.address, "adapters": self.adapters,
                "error": self.error}


@dataclass
class AdapterListing:
    topology: str
    replicas: list[ReplicaAdapters]
    declared: dict[str, str]  # adapter -> model key (lora_modules of the topology)
    loaded: dict[str, LoadedAdapter]  # adapter -> entry (`ops lora load`)

    def origin(self, name: str) -> str:
        if name in self.declared:
            return "topology"
        return "ops lora load" if name in self.loaded else "loaded by hand"

    def to_json(self) -> dict[str, Any]:
        return {"topology": self.topology, "replicas": [r.to_json() for r in self.replicas],
                "adapters": {name: {"origin": self.origin(name)} for r in self.replicas for name in r.adapters}}


def list_adapters(topology: str | None = None, timeout_s: float = 10.0) -> AdapterListing:
    """Every model replica of a fleet that is up, with the adapters its /v1/models lists."""
    fleet = _open(topology)
    records = [r for r in fleet.state.processes if r.kind in ("vllm", "sim")]
    cards = asyncio.run(_cards_of(records, timeout_s))
    rows = []
    for record, listed in zip(records, cards, strict=True):
        address = f"{record.host}:{record.port}"
        if isinstance(listed, str):
            rows.append(ReplicaAdapters(record.name, record.group, address, [], listed))
        else:
            names = [name for name, card in listed.items() if card.get("parent")]
            rows.append(ReplicaAdapters(record.name, record.group, address, names))
    declared = {name: key for key, m in fleet.topology.models.items() for name in m.lora_modules}
    return AdapterListing(fleet.state.name, rows, declared, read_records(fleet.state))


async def _cards_of(records: list[ProcessRecord], timeout_s: float) -> list[dict[str, dict[str, Any]] | str]:
    async with httpx.AsyncClient(timeout=timeout_s, trust_env=False) as client:
        return list(await asyncio.gather(*(model_cards(client, r) for r in records)))
