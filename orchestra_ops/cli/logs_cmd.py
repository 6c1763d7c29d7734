"""`ops logs NAME [-n N] [-f]`: the log of one process of a fleet, on whichever node it runs."""

from __future__ import annotations

import click

from orchestra_ops.fleet.views import log_follow, log_tail


@click.command()
@click.argument("name")
@click.option("-n", "lines", type=int, default=50, show_default=True, help="How many lines to show.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines (Ctrl-C stops).")
@click.option("--topology", help="Topology name (default: the most recent one up).")
def logs(name: str, lines: int, follow: bool, topology: str | None) -> None:
    """Print the last lines of process NAME's log from this `ops up` (e.g. `ops logs answer/1`)."""
    _, last = log_tail(name, topology, lines)
    for line in last:
        click.echo(line)
    if not follow:
        return
    try:
        for line in log_follow(name, topology):
            click.echo(line)
    except KeyboardInterrupt:
        return
