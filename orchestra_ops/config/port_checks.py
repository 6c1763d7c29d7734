"""Port clashes in a topology: two plans on one host:port are refused, located at the field that asks for it.

Every port a process listens on counts: a replica's, a service's, the gateway's, and for a model laid out over
ranks, stages and Ray nodes (config/layout.py) each server's, its data-parallel RPC port and every Ray port.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from orchestra_ops.config.layout import planned_ports, shape_ok, uses_new_layout
from orchestra_ops.config.topology import LOCAL_HOSTS, Topology

Problem = tuple[tuple[Any, ...], str]


def host_key(topology: Topology, node_name: str, host_index: int = 0) -> str:
    """The identity of a node's machine (of its `host_index`-th host), for port clashes (local names are one
    machine)."""
    node = topology.nodes[node_name]
    host = node.hosts[host_index] if node.hosts else node.host
    if host is None:
        return f"slurm:{node_name}"
    return "localhost" if host in LOCAL_HOSTS else host


def port_problems(topology: Topology) -> Iterator[Problem]:
    """Two plans on one host:port (servers, vLLM data-parallel RPC ports, every Ray port) are refused."""
    owners: dict[tuple[str, int], str] = {}
    entries: list[tuple[tuple[Any, ...], str, str, int, list[tuple[int, int, str]]]] = []
    for key, model in topology.models.items():
        if model.node in topology.nodes and uses_new_layout(model) and shape_ok(topology, key):
            for path, host_index, port, what in planned_ports(topology, key):
                entries.append((path, f"models.{key} ({what})", model.node, port, [(host_index, port, what)]))
            continue
        ports = [(0, model.port + offset, f"replica {offset}") for offset in range(model.replicas)]
        entries.append((("models", key, "port"), f"models.{key}", model.node, model.port, ports))
    for key, service in topology.services.items():
        entries.append((("services", key, "port"), f"services.{key}", service.node, service.port,
                        [(0, service.port, "")]))
    gateway_node = topology.gateway_node
    if topology.gateway is not None and gateway_node is not None:
        entries.append((("gateway", "port"), "gateway", gateway_node, topology.gateway.port,
                        [(0, topology.gateway.port, "")]))
    reported: set[tuple[Any, ...]] = set()  # one clash per field is enough to fix it
    for path, label, node_name, first, ports in entries:
        if node_name not in topology.nodes or path in reported:
            continue
        last = max(port for _, port, _ in ports)
        if last > 65535:
            yield path, f"ports {first}..{last} for {len(ports)} replicas go past 65535"
            continue
        owner = label.split(" (")[0]
        for host_index, port, _ in ports:
            machine = host_key(topology, node_name, host_index)
            slot = (machine, port)
            if slot in owners and owners[slot].split(" (")[0] != owner:
                where = "slurm node " + node_name if machine.startswith("slurm:") else f"host {machine}"
                yield path, f"port {port} on {where} is also used by {owners[slot]}"
                reported.add(path)
                break
            if slot in owners and owners[slot] != label:
                before, now = (text.split(" (", 1)[1][:-1] for text in (owners[slot], label))
                yield path, f"port {port} is planned twice for {owner}: {before} and {now}"
                reported.add(path)
                break
            owners[slot] = label
