"""A launch plan's processes grouped by the node they run on, each node with its backend."""

from __future__ import annotations

from orchestra_ops.config.topology import Topology
from orchestra_ops.fleet.backends.base import NodeGroup
from orchestra_ops.fleet.plan import LaunchPlan


def node_groups(topology: Topology, launch_plan: LaunchPlan, this_machine: str) -> list[NodeGroup]:
    """The plan's processes by node, in topology order, each node with its backend."""
    groups = []
    for name, node in topology.nodes.items():
        specs = tuple(spec for spec in launch_plan.processes if spec.node == name)
        if specs:
            groups.append(NodeGroup(name=name, backend=node.backend(this_machine), node=node, specs=specs))
    return groups
