"""`ops plan TOPOLOGY`: validate a topology and show every process `ops up` would start (dry run)."""

from __future__ import annotations

import click

from orchestra_ops.cli.render import describe_part, echo_json, print_table, stderr_console
from orchestra_ops.config.loader import load_topology
from orchestra_ops.fleet.argv_check_nodes import check_file
from orchestra_ops.fleet.endpoints import endpoints_for, render_endpoints
from orchestra_ops.fleet.indexes import missing_indexes
from orchestra_ops.fleet.plan import plan as make_plan
from orchestra_ops.fleet.process_spec import ProcessSpec


@click.command()
@click.argument("topology", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.option("--endpoints", is_flag=True, help="Print the endpoints file `ops up` would write.")
@click.option("--reproduce", is_flag=True, help="Print the shell line that starts each process by hand.")
@click.option("--check", "check_engines", is_flag=True,
              help="Also have each node's own vLLM parse the exact command of every vLLM model (as `ops up` does).")
def plan(topology: str, as_json: bool, endpoints: bool, reproduce: bool, check_engines: bool) -> None:
    """Validate TOPOLOGY and list every process `ops up` would start. Starts nothing."""
    topo = load_topology(topology)
    launch_plan = make_plan(topo)
    for job in missing_indexes(topology, topo, launch_plan):  # a missing index without a corpus: an error here
        stderr_console().print(f"note: {job.service}: `ops up` builds its index in {job.out} from {job.corpus}",
                               highlight=False, markup=False)
    if check_engines:
        for check in check_file(topology):
            said = f"skipped ({check.skipped})" if check.skipped else f"vLLM {check.version or '?'} accepts it"
            stderr_console().print(f"{check.process} on node {check.node}: {said}", highlight=False, markup=False)
    if endpoints:
        if not launch_plan.hosts_resolved:
            pending = sorted({p.node for p in launch_plan.processes if p.host is None})
            stderr_console().print(f"note: slurm nodes {', '.join(pending)} get their host at `ops up`; "
                                   "shown as <node:NAME>")
            launch_plan = launch_plan.with_hosts({node: f"<node:{node}>" for node in pending})
        click.echo(render_endpoints(endpoints_for(launch_plan)), nl=False)
        return
    if as_json:
        echo_json(launch_plan.to_json())
        return
    if reproduce:
        for spec in launch_plan.processes:
            click.echo(f"# {spec.name}  (node {spec.node}, log {spec.log})")
            click.echo(spec.reproduce)
        return
    layout = any(spec.role != "server" or spec.ranks or spec.stages for spec in launch_plan.processes)
    rows = [
        (spec.name, spec.node, f"{spec.host or '(slurm)'}:{spec.port}", _devices(spec), spec.kind,
         *([part(spec)] if layout else []), spec.served_model_name or "-", spec.log)
        for spec in launch_plan.processes
    ]
    print_table(f"{launch_plan.name}: {len(rows)} processes, backend {launch_plan.backend}",
                ["process", "node", "host:port", "gpus", "engine", *(["part"] if layout else []), "serves", "log"],
                rows)
    stderr_console().print("full commands: --reproduce (shell lines) or --json")


def _devices(spec: ProcessSpec) -> str:
    """Its GPUs, or for the CPU build of vLLM the cores of each rank (`0|1`: rank 0 on core 0, rank 1 on 1)."""
    if spec.gpus:
        return ",".join(map(str, spec.gpus))
    bind = spec.env.get("VLLM_CPU_OMP_THREADS_BIND")
    return f"cores {bind}" if bind else "-"


def part(spec: ProcessSpec) -> str:
    """What part of its model a process runs: `DP ranks 0-3`, `stages 0-1`, `Ray head`."""
    return describe_part(spec.role, spec.ranks, spec.stages, spec.domain)
