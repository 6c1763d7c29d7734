"""`ops restart NAME`: restart one process of a fleet that is up, wait until it serves, rewrite the endpoints file."""

from __future__ import annotations

import click

from orchestra_ops.cli.render import stderr_console
from orchestra_ops.cli.up_cmd import _ProgressLine
from orchestra_ops.errors import Interrupted
from orchestra_ops.fleet.repair import restart_one


@click.command()
@click.argument("process")
@click.option("--topology", help="A topology that is up (default: the most recent).")
@click.option("--timeout", type=float, help="Seconds to wait for readiness (default: ready_timeout_s).")
def restart(process: str, topology: str | None, timeout: float | None) -> None:
    """Restart PROCESS (`answer/1`, `answer-1`, or a service name); the others keep running."""
    try:
        with _ProgressLine() as progress:
            done = restart_one(process, topology, timeout_s=timeout, on_progress=progress)
    except KeyboardInterrupt:
        raise Interrupted("interrupted; the process may be starting (`ops health`, `ops restart` again)") from None
    record = done.state.by_name(done.names[0])
    stderr_console().print(f"{done.state.name}: restarted {record.name} as pid {record.pid}, ready in "
                           f"{done.ready_s:.1f} s", highlight=False, markup=False)
    for line in done.adapters:
        stderr_console().print(f"{done.state.name}: runtime adapter {line} loaded again", highlight=False,
                               markup=False)
    if done.endpoints_file is not None:
        click.echo(str(done.endpoints_file))
