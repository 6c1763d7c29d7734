"""`ops up TOPOLOGY`: launch every process, wait until all serve, write the endpoints file."""

from __future__ import annotations

import time
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

from orchestra_ops.cli.render import stderr_console
from orchestra_ops.errors import Interrupted
from orchestra_ops.fleet.lifecycle import Progress, UpOptions
from orchestra_ops.fleet.lifecycle import up as fleet_up


class _ProgressLine:
    """Live progress on stderr: a spinner on a terminal, one line per change otherwise."""

    def __init__(self) -> None:
        self.console = stderr_console()
        self.status = self.console.status("launching…") if self.console.is_terminal else None
        self.last: tuple[int, str] | None = None
        self.started = time.monotonic()  # seconds shown count the whole command, as "ready in" does

    def __enter__(self) -> _ProgressLine:
        if self.status is not None:
            self.status.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.status is not None:
            self.status.stop()

    def __call__(self, progress: Progress) -> None:
        slowest = ", ".join(f"{name} {state}" for name, state, _ in progress.pending[:3])
        more = f" +{len(progress.pending) - 3}" if len(progress.pending) > 3 else ""
        text = f"{progress.ready}/{progress.total} ready"
        text += f"; waiting on {slowest}{more}" if slowest else ""
        if progress.nodes:  # nodes without a host yet: a slurm job's state and pending reason
            text += f" [{'; '.join(progress.nodes)}]"
        elapsed = time.monotonic() - self.started
        if self.status is not None:
            self.status.update(escape(f"{text} ({elapsed:.0f} s)"))
        elif self.last != (progress.ready, text):
            self.last = (progress.ready, text)
            self.console.print(f"[{elapsed:5.1f} s] {text}", highlight=False, markup=False)


class _IndexProgress:
    """`building the index of retrieval: 512/2048 documents`: at the start, every 10 %, and at the end."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.shown: dict[str, int] = {}

    def __call__(self, service: str, done: int, total: int) -> None:
        tenth = 10 * done // max(total, 1)
        if service in self.shown and tenth == self.shown[service] and done < total:
            return
        self.shown[service] = tenth
        self.console.print(f"building the index of {service}: {done}/{total} documents", highlight=False,
                           markup=False)


@click.command()
@click.argument("topology", type=click.Path(dir_okay=False))
@click.option("--backend", type=click.Choice(["local", "tmux"]),
              help="How nodes on this machine run (ssh and slurm nodes keep theirs).")
@click.option("--timeout", type=float, help="Seconds to wait for readiness (default: ready_timeout_s).")
@click.option("--no-wait", is_flag=True, help="Launch and return; do not wait for readiness.")
@click.option("--replace", is_flag=True, help="Stop the running fleet of this topology first.")
@click.option("--keep-on-failure", is_flag=True, help="Leave the other processes running if one fails.")
@click.option("--endpoints-out", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the endpoints file here.")
@click.option("--tmux-socket", help="tmux server socket name (tmux -L NAME) for tmux sessions, here and on ssh nodes.")
def up(topology: str, backend: str | None, timeout: float | None, no_wait: bool, replace: bool,
       keep_on_failure: bool, endpoints_out: Path | None, tmux_socket: str | None) -> None:
    """Launch every process of TOPOLOGY, wait until all are serving, write the endpoints file.

    On a fleet of TOPOLOGY that is up and serving as the file says, nothing starts: "already up", exit 0
    (so `ops up X && ops eval …` runs twice); processes that died are restarted, the others kept.
    """
    console = stderr_console()
    options = UpOptions(backend=backend, timeout_s=timeout, wait=not no_wait, replace=replace,
                        keep_on_failure=keep_on_failure, endpoints_out=endpoints_out, tmux_socket=tmux_socket)
    try:
        with _ProgressLine() as progress:
            result = fleet_up(topology, options, on_progress=progress,
                              on_warning=lambda message: console.print(f"warning: {message}", highlight=False,
                                                                       markup=False),
                              on_index_progress=_IndexProgress(console))
    except KeyboardInterrupt:
        raise Interrupted("interrupted; whatever was launched is left running (`ops status`, `ops down`)") from None
    state = result.state
    where = ", ".join(f"{node.name} ({node.backend})" for node in state.nodes)
    for name in result.external:
        console.print(f"warning: {name}: its port serves the model but not from the process ops started "
                      "(started by hand?); left alone", highlight=False, markup=False)
    if result.already_up:
        ready = f"{len(state.processes)}/{len(state.processes)} ready" if result.ready_s is not None else \
            f"{len(state.processes)} processes running (not waiting: `ops health`)"
        console.print(f"{state.name}: already up, {ready}", highlight=False, markup=False)
    elif result.restarted:
        console.print(f"{state.name}: restarted {', '.join(result.restarted)} (ready in {result.ready_s or 0:.1f} s); "
                      f"{len(result.kept)} kept running", highlight=False, markup=False)
    elif result.ready_s is not None:
        console.print(f"{state.name}: {len(state.processes)} processes ready in {result.ready_s:.1f} s "
                      f"on {where}", highlight=False)
    else:
        console.print(f"{state.name}: {len(state.processes)} processes launched on {where}; not waiting "
                      "(check with `ops health`)", highlight=False)
    for line in result.adapters:
        console.print(f"{state.name}: runtime adapter {line} loaded again", highlight=False, markup=False)
    if result.endpoints_file is not None:
        click.echo(str(result.endpoints_file))
