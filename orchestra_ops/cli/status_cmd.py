"""`ops status`: the processes of a fleet as state.json records them, alive or not."""

from __future__ import annotations

import click

from orchestra_ops.cli.render import echo_json, print_table
from orchestra_ops.fleetinfo import status as fleet_status


@click.command()
@click.argument("topology", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status(topology: str | None, as_json: bool) -> None:
    """Show the processes of TOPOLOGY (default: the most recent one up)."""
    report = fleet_status(topology)
    if as_json:
        echo_json(report.to_json())
        return
    rows = [(p.name, p.pid, "yes" if p.alive else "NO", "-" if p.uptime_s is None else f"{p.uptime_s:.0f} s",
             p.port, p.log) for p in report.processes]
    print_table(f"{report.state.name} ({report.state.status}, backend {report.state.backend})",
                ["process", "pid", "alive", "uptime", "port", "log"], rows)
