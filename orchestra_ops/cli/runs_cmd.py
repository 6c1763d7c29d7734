"""`ops runs` (every run under the runs root and its state) and `ops stop RUN` (the clean stop)."""

from __future__ import annotations

import click

from orchestra_ops.cli.render import echo_json, print_table, wide_option
from orchestra_ops.runner.progress import format_duration, format_wall
from orchestra_ops.supervise.runs import ACTIVE, RunRow, list_runs, resolve_run, stop_run

ROOT_OPTION = click.option("--root", default="runs", show_default=True, type=click.Path(file_okay=False),
                           help="The directory that holds the run dirs.")


@click.command("runs")
@ROOT_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the runs as JSON.")
@wide_option
def runs(root: str, as_json: bool) -> None:
    """Every run under --root: state, score ± its 95 % interval, done/failed/total, elapsed, rate, ETA, where.

    States: running, stalled, restarting, waiting (for the fleet), stopped, crashed, finished, unreadable.
    A state shown with `?` is the one recorded: it could not be checked (a slurm controller that does not answer).
    """
    rows = list_runs(root)
    if as_json:
        echo_json([row.to_json() for row in rows])
        return
    if not rows:
        click.echo(f"no runs under {root}/")
        return
    print_table(f"runs under {root}/", ["run", "suite", "state", "score", "elapsed", "done", "failed", "rate", "ETA",
                                        "topology", "where", "attempts"], [_cells(row) for row in rows],
                optional=("attempts", "where", "topology", "rate", "ETA", "suite", "failed"), whole=("score",))
    for row in rows:
        if row.state == "stalled" and row.stall:
            click.echo(f"{row.name}: stalled, no task finished for {row.stall.get('since_s')} s; "
                       f"see {row.run_dir}/eval.log ([STALL] lines)")
        if row.unconfirmed:
            click.echo(f"{row.name}: {row.state} as recorded, not confirmed: {row.unconfirmed}")
        if row.state in ("unreadable", "waiting") and row.reason:
            click.echo(f"{row.name}: {row.state}: {row.reason}")


def _cells(row: RunRow) -> list[str]:
    return [row.name, row.suite or "?", f"{row.state}?" if row.unconfirmed else row.state, row.score or "",
            "" if row.elapsed_s is None else format_wall(row.elapsed_s),
            f"{row.done}/{'?' if row.total is None else row.total}", str(row.failed),
            "" if row.rate is None else f"{row.rate:.1f}/s", "" if row.eta_s is None else format_duration(row.eta_s),
            row.topology or "?", row.where, str(row.attempts)]


@click.command("stop")
@click.argument("run")
@ROOT_OPTION
@click.option("--wait", "wait_s", type=click.FloatRange(min=0), default=120.0, show_default=True,
              help="Seconds to wait for the run to stop (0: signal and return).")
def stop(run: str, root: str, wait_s: float) -> None:
    """Stop RUN the clean way: no new tasks, those in flight finish, results flushed, no restart."""
    run_dir = resolve_run(run, root)
    row = stop_run(run_dir, wait_s=wait_s)
    if row.state in ACTIVE:
        click.echo(f"{run_dir}: asked to stop; still {row.state} after {wait_s:g} s (tasks in flight finish first)")
        return
    click.echo(f"{run_dir}: {row.state} ({row.done} ok, {row.failed} failed"
               f"{'' if row.total is None else f' of {row.total}'}); continue it with "
               f"`ops eval {row.suite or 'SUITE'} --run-dir {run_dir} --resume`")
