"""`ops status`: the nodes and processes of a fleet, as state.json records them and their backends see them."""

from __future__ import annotations

import click

from orchestra_ops.cli.render import echo_json, print_table
from orchestra_ops.fleet.views import gateway_url
from orchestra_ops.fleet.views import status as fleet_status


@click.command()
@click.argument("topology", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status(topology: str | None, as_json: bool) -> None:
    """Show the processes of TOPOLOGY (default: the most recent one up) on every node."""
    report = fleet_status(topology)
    if as_json:
        echo_json(report.to_json())
        return
    rows = [(p.name, p.node, p.backend, "-" if p.pid is None else p.pid, "yes" if p.alive else "NO", p.state,
             "-" if p.uptime_s is None else f"{p.uptime_s:.0f} s", f"{p.host or '?'}:{p.port}", p.log)
            for p in report.processes]
    print_table(f"{report.state.name} ({report.state.status})",
                ["process", "node", "backend", "pid", "alive", "state", "uptime", "host:port", "log"], rows)
    notes = [(n.name, n.backend, n.host or "-", n.state or "-", n.problem or "") for n in report.nodes
             if n.state or n.problem]
    if notes:
        print_table(None, ["node", "backend", "host", "state", "problem"], notes)
    url = gateway_url(report.state)
    if url is not None:
        click.echo(f"gateway: {url}/v1")
    if report.state.engine_versions:
        print_table(None, ["node", "vLLM"], sorted(report.state.engine_versions.items()))
