"""The vLLM argv check (argv_check.py) on every node of a topology, through the node's backend: on this
machine (one process for every local node, with the result cache of argv_check_cache.py), over the ssh
agent (one process per node); a slurm node's sbatch job runs it first itself (backends/sbatch.py).

`ops up` calls `check_topology_engines` before launching; `ops plan --check` calls `check_file`.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from orchestra_ops.config.topology import Topology
from orchestra_ops.config.yamlpos import load_positioned
from orchestra_ops.errors import TopologyError
from orchestra_ops.fleet import argv_check_cache
from orchestra_ops.fleet.argv_check import (
    Answer,
    CheckItem,
    Runner,
    VllmCheck,
    batch_argv,
    batch_env,
    batch_timeout,
    check_specs,
    parse_batch,
    problems,
)
from orchestra_ops.fleet.backends import Backends
from orchestra_ops.fleet.backends.base import LaunchContext, NodeGroup
from orchestra_ops.fleet.node_groups import node_groups


def check_groups(groups: Sequence[NodeGroup], backends: Backends, ctx: LaunchContext) -> list[VllmCheck]:
    """Check every vLLM model of the groups on its own node (this machine, or over ssh; slurm: skipped)."""
    runners: dict[str, Runner | None] = {}
    here = run_here(ctx.cwd)  # every local node is this machine: one check process for all of them
    for group in groups:
        if group.backend in ("local", "tmux"):
            runners[group.name] = here
        elif group.backend == "ssh":
            runners[group.name] = _over_ssh(group, backends, ctx)
        else:
            runners[group.name] = None  # a slurm node: its sbatch job checks first (backends/sbatch.py)
    return check_specs([spec for group in groups for spec in group.specs], runners)


def _over_ssh(group: NodeGroup, backends: Backends, ctx: LaunchContext) -> Runner:
    from orchestra_ops.fleet.backends.ssh import SshBackend  # fabric and paramiko only where a node is remote

    backend = backends.get("ssh")
    assert isinstance(backend, SshBackend)

    def run(items: Sequence[CheckItem]) -> list[Answer]:
        code, out, err = backend.run_on_node(group, ctx, batch_argv(items), batch_env(items),
                                             batch_timeout(len(items)))
        return parse_batch(code, out, err, len(items))

    return run


def run_here(cwd: Path) -> Runner:
    """Run checks on this machine, in `cwd`: a command this vLLM accepted before is not asked again
    (argv_check_cache.py); the others in one process, started with the environment they share over ours."""

    def run(items: Sequence[CheckItem]) -> list[Answer]:
        answers: list[Answer | None] = []
        keys = []
        for item in items:
            key = argv_check_cache.cache_key(item.spec.engine_argv, item.spec.env, cwd)  # what vLLM checks
            version = argv_check_cache.accepted(key) if key else None
            answers.append(None if version is None else (True, version, None))
            keys.append(key)
        asked = [index for index, answer in enumerate(answers) if answer is None]
        if asked:
            batch = [items[index] for index in asked]
            code, out, err = _run_local(batch_argv(batch), cwd, batch_env(batch), batch_timeout(len(batch)))
            for index, answer in zip(asked, parse_batch(code, out, err, len(batch)), strict=True):
                answers[index] = answer
                key = keys[index]
                if answer[0] and answer[1] and key:
                    argv_check_cache.remember(key, answer[1])
        return [answer for answer in answers if answer is not None]

    return run


def _run_local(argv: list[str], cwd: Path, env: Mapping[str, str], timeout: float) -> tuple[int, str, str]:
    """(exit status, stdout, stderr); past `timeout` the process is killed and what it answered is kept."""
    try:
        done = subprocess.run(argv, cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True,
                              timeout=timeout, check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
        return 124, out, f"vLLM did not answer the check within {timeout:.0f} s"
    except OSError as exc:
        return 127, "", str(exc)
    return done.returncode, done.stdout, done.stderr


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
