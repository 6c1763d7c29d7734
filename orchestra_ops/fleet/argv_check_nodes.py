"""The vLLM argv check (argv_check.py) on every node of a topology, through the node's backend: on this
machine, over the ssh agent; a slurm node's sbatch job runs it first itself (backends/sbatch.py).

`ops up` calls `check_topology_engines` before launching; `ops plan --check` calls `check_file`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from orchestra_ops.config.topology import Topology
from orchestra_ops.config.yamlpos import load_positioned
from orchestra_ops.errors import TopologyError
from orchestra_ops.fleet.argv_check import (
    CHECK_TIMEOUT_S,
    CheckRun,
    Runner,
    VllmCheck,
    check_specs,
    problems,
    run_here,
)
from orchestra_ops.fleet.backends import Backends
from orchestra_ops.fleet.backends.base import LaunchContext, NodeGroup
from orchestra_ops.fleet.node_groups import node_groups


def check_groups(groups: Sequence[NodeGroup], backends: Backends, ctx: LaunchContext) -> list[VllmCheck]:
    """Check every vLLM model of the groups on its own node (this machine, or over ssh; slurm: skipped)."""
    runners: dict[str, Runner | None] = {}
    for group in groups:
        if group.backend in ("local", "tmux"):
            runners[group.name] = run_here(ctx.cwd)
        elif group.backend == "ssh":
            runners[group.name] = _over_ssh(group, backends, ctx)
        else:
            runners[group.name] = None  # a slurm node: its sbatch job checks first (backends/sbatch.py)
    return check_specs([spec for group in groups for spec in group.specs], runners)


def _over_ssh(group: NodeGroup, backends: Backends, ctx: LaunchContext) -> Runner:
    from orchestra_ops.fleet.backends.ssh import SshBackend  # fabric and paramiko only where a node is remote

    backend = backends.get("ssh")
    assert isinstance(backend, SshBackend)

    def run(item: CheckRun) -> tuple[int, str, str]:
        return backend.run_on_node(group, ctx, item.argv, dict(item.spec.env), CHECK_TIMEOUT_S)

    return run


def check_topology_engines(source: Path, topology: Topology, groups: Sequence[NodeGroup], backends: Backends,
                           ctx: LaunchContext) -> list[VllmCheck]:
    """Run the checks; raise a TopologyError naming the topology line of every model vLLM refuses."""
    checks = check_groups(groups, backends, ctx)
    refused = problems(checks, load_positioned(source), topology)
    if refused:
        raise TopologyError(refused)
    return checks


def check_file(topology_file: str | Path, backend: str | None = None) -> list[VllmCheck]:
    """`ops plan --check`: the checks `ops up` runs before launching, without launching anything."""
    from orchestra_ops.config.loader import load_topology
    from orchestra_ops.fleet.plan import plan

    source = Path(topology_file).resolve()
    topology = load_topology(source)
    launch_plan = plan(topology)
    groups = node_groups(topology, launch_plan, backend or topology.backend)
    ctx = LaunchContext(topology=topology.name, cwd=Path.cwd(), nofile=topology.defaults.ulimit_nofile,
                        log_dir=launch_plan.log_dir)
    with Backends() as backends:
        return check_topology_engines(source, topology, groups, backends, ctx)
