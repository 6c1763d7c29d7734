"""The live progress display of `ops eval` on a terminal: one panel redrawn in place.

done, failed, in flight, rate, ETA, and the p50/p99 latency of the tasks and of the model calls
that finished in the last minute. Lines the run prints meanwhile (routing, warnings, the end
summary) appear above it; `[TASK_COMPLETE]` and `[PROGRESS]` lines go only to eval.log. Without
a terminal nothing changes: the plain lines go to the console as they always did.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from orchestra_ops.runner.progress import Progress, WindowStats, format_duration
from orchestra_ops.runner.tee import TeeLog

REFRESH_PER_SECOND = 4


def render(progress: Progress, title: str) -> Panel:
    now = time.monotonic()
    total = max(progress.total, 1)
    share = 100 * progress.finished / total
    bar = Table.grid(expand=True, padding=(0, 1))
    bar.add_column(ratio=1)
    bar.add_column(no_wrap=True)
    bar.add_row(ProgressBar(total=total, completed=progress.finished),
                f"{progress.finished}/{progress.total} tasks ({share:.1f}%)")
    counts = Text.assemble(
        ("done ", "bold"), (f"{progress.ok}", "green"), "   ",
        ("failed ", "bold"), (f"{progress.failed}", "red" if progress.failed else ""), "   ",
        ("in flight ", "bold"), f"{progress.in_flight}", "   ",
        ("rate ", "bold"), f"{progress.rate(now):.1f}/s", "   ",
        ("ETA ", "bold"), format_duration(progress.eta_s(now)), "   ",
        ("elapsed ", "bold"), format_duration(now - progress.started_at))
    recent = Text.assemble(("last minute: ", "bold"), _window("tasks", progress.recent_tasks()), "   ",
                           _window("model calls", progress.recent_calls()))
    return Panel(Group(bar, counts, recent), title=title, title_align="left")


def _window(label: str, stats: WindowStats | None) -> str:
    if stats is None:
        return f"{label} -"
    return f"{label} p50 {stats.p50:.2f}s p99 {stats.p99:.2f}s (n={stats.count})"


@contextlib.contextmanager
def live_progress(tee: TeeLog, progress: Progress, title: str, *, enabled: bool | None = None) -> Iterator[None]:
    """On a terminal (stdout is a TTY, unless `enabled` says otherwise): the live panel for the block."""
    if not (sys.stdout.isatty() if enabled is None else enabled):
        yield
        return
    console = Console()
    previous_console, previous_events = tee.console, tee.events_to_console

    def print_above(text: str) -> None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)

    with Live(get_renderable=lambda: render(progress, title), console=console,
              refresh_per_second=REFRESH_PER_SECOND, transient=False, redirect_stdout=False, redirect_stderr=False):
        tee.console, tee.events_to_console = print_above, False
        try:
            yield
        finally:
            tee.console, tee.events_to_console = previous_console, previous_events
