"""`ops attach RUN`: the live panel of a detached run, redrawn from what it writes to its run dir.

It reads `live.json`, `run.json` and the tail of `eval.log` twice a second; Ctrl-C detaches (the run
goes on); the command ends by itself when the run does.
"""

from __future__ import annotations

import time
from pathlib import Path

import click
from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from orchestra_ops.runner.progress import format_duration
from orchestra_ops.runner.tee import LOG_FILE
from orchestra_ops.supervise.runs import DONE, RunRow, resolve_run, run_row

REFRESH_S = 0.5
LOG_LINES = 8
QUIET_PREFIXES = ("[TASK_COMPLETE]", "[PROGRESS]")


def render(row: RunRow, log_lines: list[str]) -> Panel:
    total = row.total or max(row.done + row.failed, 1)
    bar = Table.grid(expand=True, padding=(0, 1))
    bar.add_column(ratio=1)
    bar.add_column(no_wrap=True)
    bar.add_row(ProgressBar(total=total, completed=row.done + row.failed),
                f"{row.done + row.failed}/{row.total if row.total is not None else '?'} tasks")
    counts = Text.assemble(
        ("state ", "bold"), (row.state, "red" if row.state in ("stalled", "crashed") else "green"), "   ",
        ("done ", "bold"), f"{row.done}", "   ", ("failed ", "bold"), f"{row.failed}", "   ",
        ("rate ", "bold"), "-" if row.rate is None else f"{row.rate:.1f}/s", "   ",
        ("ETA ", "bold"), format_duration(row.eta_s), "   ", ("where ", "bold"), row.where, "   ",
        ("attempts ", "bold"), f"{row.attempts} ({row.restarts} restart(s))")
    parts: list[Text | Table] = [bar, counts]
    if row.reason:
        parts.append(Text(f"reason: {row.reason}"))
    if row.unconfirmed:
        parts.append(Text(f"{row.state} as recorded, not confirmed: {row.unconfirmed}", style="yellow"))
    parts += [Text(line, overflow="ellipsis", no_wrap=True) for line in log_lines]
    parts.append(Text("Ctrl-C detaches; the run goes on (ops stop RUN stops it)", style="dim"))
    return Panel(Group(*parts), title=f"ops attach · {row.name}", title_align="left")


def log_tail(run_dir: Path, count: int = LOG_LINES) -> list[str]:
    try:
        with open(run_dir / LOG_FILE, "rb") as handle:
            handle.seek(0, 2)
            handle.seek(max(0, handle.tell() - 32_000))
            text = handle.read().decode(errors="replace")
    except OSError:
        return []
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith(QUIET_PREFIXES)]
    return lines[-count:]


@click.command("attach")
@click.argument("run")
@click.option("--root", default="runs", show_default=True, type=click.Path(file_okay=False),
              help="The directory that holds the run dirs.")
def attach(run: str, root: str) -> None:
    """Show RUN's live panel (done, failed, rate, ETA, state, its log); Ctrl-C detaches."""
    run_dir = resolve_run(run, root)
    console = Console()
    row = run_row(run_dir)
    try:
        with Live(render(row, log_tail(run_dir)), console=console, refresh_per_second=4, transient=False) as live:
            while row.state not in DONE:
                time.sleep(REFRESH_S)
                row = run_row(run_dir)
                live.update(render(row, log_tail(run_dir)))
    except KeyboardInterrupt:
        click.echo(f"detached from {run_dir}; it goes on ({row.state}); `ops stop {run_dir}` stops it")
        return
    click.echo(f"run {row.state}: {row.done} ok, {row.failed} failed")
