"""A launch plan's processes grouped by the node they run on, each node with its backend.

A node that spans hosts (`hosts: [a, b]`) is one group per host, named `NODE@i` (config/placement.py's
machine_name), each with that host's node settings and so its own backend (this machine, or ssh).
"""

from __future__ import annotations

from orchestra_ops.config.placement import machine_name
from orchestra_ops.config.topology import Topology
from orchestra_ops.fleet.backends.base import NodeGroup
from orchestra_ops.fleet.plan import LaunchPlan


def node_groups(topology: Topology, launch_plan: LaunchPlan, this_machine: str) -> list[NodeGroup]:
    """The plan's processes by node, in topology order, each node with its backend."""
    groups = []
    for name, node in topology.nodes.items():
        per_host = node.host_nodes()
        for index, host_node in enumerate(per_host):
            machine = machine_name(name, index, len(per_host))
            specs = tuple(spec for spec in launch_plan.processes if spec.node == machine)
            if specs:
                groups.append(NodeGroup(name=machine, backend=host_node.backend(this_machine), node=host_node,
                                        specs=specs))
    return groups
