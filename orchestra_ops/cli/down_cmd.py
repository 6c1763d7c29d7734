"""`ops down [TOPOLOGY]`: stop every process of a fleet and verify nothing is left."""

from __future__ import annotations

import click

from orchestra_ops.cli.render import stderr_console
from orchestra_ops.errors import OpsError
from orchestra_ops.fleet.teardown import down as fleet_down


class LeftoverError(OpsError):
    """`ops down` could not remove everything (exit 1)."""


@click.command()
@click.argument("topology", required=False)
@click.option("--timeout", type=float, default=15.0, show_default=True,
              help="Seconds between SIGTERM and SIGKILL.")
def down(topology: str | None, timeout: float) -> None:
    """Stop TOPOLOGY (default: the most recent one up) on every node: SIGTERM (or scancel), wait, SIGKILL, verify."""
    console = stderr_console()
    result = fleet_down(topology, timeout)
    if result is None:
        console.print("nothing is up")
        return
    report = result.report
    parts = []
    if report.terminated:
        parts.append(f"{len(report.terminated)} stopped")
    if report.killed:
        parts.append(f"{len(report.killed)} needed SIGKILL ({', '.join(report.killed)})")
    if report.already_gone:
        parts.append(f"{len(report.already_gone)} already gone")
    summary = ", ".join(parts) or "no processes"
    if not report.clean:
        raise LeftoverError(f"{result.name}: {summary}; NOT clean: {report.problems()}")
    prefix = "" if result.was_up else "(was already down) "
    checked = ["process", "port"]
    checked += ["tmux session"] if {"tmux", "ssh"} & set(result.backends) else []
    checked += ["slurm job"] if "slurm" in result.backends else []
    console.print(f"{result.name}: {prefix}{summary}; verified: no {', '.join(checked[:-1])} or {checked[-1]} left",
                  highlight=False, markup=False)
