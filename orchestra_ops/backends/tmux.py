"""The tmux backend: one tmux session per topology, one window per process (libtmux).

Each window runs `bash -c SCRIPT` given to tmux as separate arguments, so tmux executes it without
a shell of its own and the pane's pid is bash's; the script sets `ulimit -n`, exports the plan's
environment, sends its output through `tee -a LOG` (line-buffered, ignoring SIGTERM/SIGHUP so the
last lines reach the file while the server shuts down) and then `exec`s the server: the pane pid is
the server's pid and its process group the pane's. `socket_name` selects a private tmux server
(`tmux -L NAME`), which is what the tests use.
"""

from __future__ import annotations

import logging
import os
import shlex
from collections.abc import Sequence
from pathlib import Path

import libtmux
from libtmux.exc import LibTmuxException

from orchestra_ops import procs
from orchestra_ops.backends.base import (
    LaunchContext,
    StopReport,
    absolute_log,
    line_buffered,
    make_record,
    open_log,
    resolve_argv,
    stop_records,
)
from orchestra_ops.errors import LaunchError
from orchestra_ops.plan import ProcessSpec
from orchestra_ops.state import FleetState, ProcessRecord

log = logging.getLogger(__name__)


def session_name(topology: str) -> str:
    """tmux turns '.' and ':' in session names into '_'; do it ourselves so lookups match."""
    return "ops-" + topology.replace(".", "_").replace(":", "_")


def window_script(argv: Sequence[str], env: dict[str, str], log_file: Path, nofile: int) -> str:
    """The bash script of one window: limits, environment, tee to the log, then exec the server."""
    lines = [f"ulimit -Sn {int(nofile)}"]
    path = os.environ.get("PATH")
    if path:
        lines.append(f"export PATH={shlex.quote(path)}")
    lines += [f"export {key}={shlex.quote(value)}" for key, value in env.items()]
    tee = f"trap '' TERM HUP INT; exec tee -a {shlex.quote(str(log_file))}"
    lines.append(f"exec > >({tee}) 2>&1")
    lines.append(f"exec {shlex.join(line_buffered(argv))}")
    return "\n".join(lines)


class TmuxBackend:
    name = "tmux"

    def __init__(self, topology: str, socket_name: str | None = None) -> None:
        self.socket_name = socket_name
        self.session = session_name(topology)
        self.server = libtmux.Server(socket_name=socket_name)

    def tmux(self, *args: str) -> list[str]:
        """Every tmux call goes through here; a failure becomes a LaunchError with tmux's message."""
        result = self.server.cmd(*args)
        if result.returncode != 0:
            message = " ".join(result.stderr) or f"exit {result.returncode}"
            raise LaunchError(f"tmux {args[0]} failed: {message}")
        return list(result.stdout)

    def has_session(self) -> bool:
        try:
            return self.server.cmd("has-session", "-t", f"={self.session}").returncode == 0
        except LibTmuxException:
            return False

    def launch(self, specs: Sequence[ProcessSpec], ctx: LaunchContext) -> list[ProcessRecord]:
        if self.has_session():
            raise LaunchError(f"tmux session '{self.session}' already exists{self._where()}; "
                              f"`ops down {ctx.topology}` first (or `tmux kill-session -t {self.session}`)")
        records: list[ProcessRecord] = []
        for spec in specs:
            try:
                records.append(self._start(spec, ctx))
            except LaunchError:
                stop_records(records, timeout=5)
                self.kill_session()
                raise
        return records

    def _start(self, spec: ProcessSpec, ctx: LaunchContext) -> ProcessRecord:
        argv = resolve_argv(spec.argv)
        log_file = absolute_log(spec, ctx.cwd)
        offset = open_log(log_file, spec.reproduce)
        script = window_script(argv, dict(spec.env), log_file, ctx.nofile)
        fmt = "#{window_id} #{pane_pid}"
        command = ["bash", "-c", script]
        if self.has_session():
            out = self.tmux("new-window", "-d", "-P", "-F", fmt, "-t", f"={self.session}:",
                            "-n", spec.name, "-c", str(ctx.cwd), "--", *command)
        else:  # the first window, or every earlier one already exited and took the session along
            out = self.tmux("new-session", "-d", "-P", "-F", fmt, "-s", self.session, "-n", spec.name,
                            "-c", str(ctx.cwd), "-x", "200", "-y", "50", "--", *command)
        window_id, pid = out[0].split()
        log.debug("started %s in tmux window %s as pid %s", spec.name, window_id, pid)
        return make_record(spec, int(pid), argv, log_file, offset, tmux_window=window_id)

    def kill_session(self) -> None:
        if self.has_session():
            self.server.cmd("kill-session", "-t", f"={self.session}")

    def stop(self, state: FleetState, timeout: float) -> StopReport:
        report = stop_records(state.processes, timeout)
        self.kill_session()
        if self.has_session():
            report.tmux_session_left = f"{self.session}{self._where()}"
        return report

    def alive(self, record: ProcessRecord) -> bool:
        return procs.is_alive(record.pid, record.create_time)

    def exit_code(self, record: ProcessRecord) -> int | None:
        return None  # tmux reaps its panes; the exit status is not ours to read

    def log_path(self, record: ProcessRecord) -> Path:
        return Path(record.log)

    def _where(self) -> str:
        return f" on tmux socket '{self.socket_name}'" if self.socket_name else ""
