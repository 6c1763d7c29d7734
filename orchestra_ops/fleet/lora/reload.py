"""Runtime adapters through a repair: a replica that `ops up` (repair) or `ops restart` starts again has lost
the adapters `ops lora load` put into its predecessor (vLLM keeps them in memory only); load them again.

    entries = adapters_of(state, names)        before the restart: lora.json's entries on those replicas' models
    … restart, wait until they serve …
    report = reload_adapters(entries, state, names)   into the new processes, all or none per adapter
    runtime_endpoints(state)                   each loaded adapter's key for the endpoints file

All or none: an adapter the new process refuses (or does not take in time) is unloaded from the
model's other replicas too, and leaves lora.json and the endpoints file; `failures` says which and
why, and the repair reports it (exit 3) after the fleet itself is recorded as repaired.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import httpx

from orchestra_ops.fleet.endpoints import Endpoints
from orchestra_ops.fleet.lora.calls import ReplicaOutcome, each, unload_one
from orchestra_ops.fleet.lora.loaded import LoadedAdapter, ReplicaRef, locked, read_records, write_records
from orchestra_ops.fleet.lora.loading import load_or_roll_back, where_served
from orchestra_ops.fleet.state import FleetState, ProcessRecord

RELOAD_TIMEOUT_S = 300.0  # as `ops lora load`: a real replica reads the weights from disk first


@dataclass
class ReloadReport:
    reloaded: list[str] = field(default_factory=list)  # "'ft' into answer/1"
    failures: list[str] = field(default_factory=list)  # one message per adapter that could not go back in


def adapters_of(state: FleetState, names: Sequence[str]) -> list[LoadedAdapter]:
    """The runtime adapters (lora.json, whole entries) served by the models of the processes `names`."""
    models = {state.by_name(name).group for name in names}
    return [entry for entry in read_records(state).values() if entry.model in models and not entry.partial]


def reload_adapters(entries: Sequence[LoadedAdapter], state: FleetState, names: Sequence[str],
                    timeout_s: float = RELOAD_TIMEOUT_S) -> ReloadReport:
    """Load each of `entries` into the restarted processes `names` of `state` (the fleet after the restart)."""
    report = ReloadReport()
    if not entries:
        return report
    with locked(state.name, timeout_s):
        records = read_records(state)  # the adapters the restart did not touch
        for entry in entries:
            fresh = [r for r in state.processes if r.name in names and r.group == entry.model]
            attempt = load_or_roll_back(fresh, entry.name, entry.path, timeout_s)
            if attempt.ok:
                current = {r.name: ReplicaRef.of(state, r) for r in state.processes}
                refs = [current[ref.name] for ref in entry.replicas if ref.name in current]
                refs += [current[r.name] for r in fresh if r.name not in {ref.name for ref in entry.replicas}]
                records[entry.name] = replace(entry, replicas=refs)
                report.reloaded.append(f"'{entry.name}' into {', '.join(r.name for r in fresh)}")
                continue
            others = [r for r in state.processes if r.group == entry.model and r.name not in names]
            undo = asyncio.run(each(others, 60.0, functools.partial(_unload, name=entry.name)))
            refused = "; ".join(f"{o.replica}: {o.message}" for o in attempt.outcomes if not o.ok)
            stuck = [o for o in undo if not o.ok]
            served = where_served(entry.name, attempt.served, [o.replica for o in stuck])
            report.failures.append(
                f"'{entry.name}' ({entry.path}) could not be loaded again into {', '.join(r.name for r in fresh)} "
                f"({refused}); all or none: unloaded from the model's other replicas too"
                + "".join(f" (could not from {o.replica}: {o.message})" for o in stuck)
                + f"; {served}; `ops lora load {entry.name} {entry.path} --model {entry.model}` to try again")
            records.pop(entry.name, None)
        write_records(state.name, records)
    return report


async def _unload(client: httpx.AsyncClient, record: ProcessRecord, *, name: str) -> ReplicaOutcome:
    return await unload_one(client, record, name)


def runtime_endpoints(state: FleetState) -> Endpoints:
    """adapter name -> the replicas serving it, for every runtime adapter lora.json holds for this fleet."""
    by_name = {r.name: r for r in state.processes}
    out: Endpoints = {}
    for name, entry in read_records(state).items():
        if entry.partial:
            continue
        records = [by_name[ref.name] for ref in entry.replicas if ref.name in by_name]
        out[name] = [{"ip_addr": r.host, "port": r.port} for r in records if r.host is not None]
    return out
