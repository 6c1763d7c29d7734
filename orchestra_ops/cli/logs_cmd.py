"""`ops logs NAME [-n N] [-f]`: the log of one process of a fleet."""

from __future__ import annotations

import click

from orchestra_ops.errors import StateError
from orchestra_ops.fleetinfo import find_log
from orchestra_ops.logtail import follow as follow_log
from orchestra_ops.logtail import tail


@click.command()
@click.argument("name")
@click.option("-n", "lines", type=int, default=50, show_default=True, help="How many lines to show.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines (Ctrl-C stops).")
@click.option("--topology", help="Topology name (default: the most recent one up).")
def logs(name: str, lines: int, follow: bool, topology: str | None) -> None:
    """Print the last lines of process NAME's log (e.g. `ops logs answer/1`)."""
    path = find_log(name, topology)
    try:
        for line in tail(path, lines):
            click.echo(line)
        if follow:
            for line in follow_log(path):
                click.echo(line)
    except FileNotFoundError:
        raise StateError(f"{path}: no such log file") from None
    except KeyboardInterrupt:
        return
