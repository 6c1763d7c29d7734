"""The tmux backend: one tmux session per node, one window per process (libtmux).

Each window runs `bash --norc -c SCRIPT` given to tmux as separate arguments, so tmux executes it
without a shell of its own and the pane's pid is bash's (`--norc`: bash would otherwise source
~/.bashrc whenever SSH_CLIENT is in the environment, as it is on an ssh node; the environment comes
from the tmux server instead, and PATH from the script); the script exports the plan's environment, sends
its output through `tee -a LOG` (line-buffered, ignoring SIGTERM/SIGHUP so the last lines reach the
file while the server shuts down), raises `ulimit -n` (capped at the hard limit, with a line in the
log) and then `exec`s the server: the pane pid is the server's pid and its process group the
pane's. The ssh backend runs the same script in tmux on another host. The node's handle names the
tmux server (`tmux -L SOCKET`; None is the default server) and the session.
"""

from __future__ import annotations

import logging
import os
import shlex
from collections.abc import Mapping, Sequence

import libtmux
from libtmux.exc import LibTmuxException

from orchestra_ops.errors import LaunchError
from orchestra_ops.fleet.backends.base import LaunchContext, Launched, NodeGroup, NodeView, StopReport
from orchestra_ops.fleet.backends.localprocs import (
    LocalLogs,
    absolute_log,
    alive_here,
    check_here,
    line_buffered,
    make_record,
    open_log,
    resolve_argv,
    stop_records,
    view_here,
)
from orchestra_ops.fleet.process_spec import ProcessSpec
from orchestra_ops.fleet.state import NodeRecord, ProcessRecord

log = logging.getLogger(__name__)


def session_name(topology: str, node: str) -> str:
    """tmux turns '.' and ':' in session names into '_'; do it ourselves so lookups match."""
    return f"ops-{topology}-{node}".replace(".", "_").replace(":", "_")


def window_script(argv: Sequence[str], env: Mapping[str, str], log_file: str, nofile: int,
                  path: str | None) -> str:
    """The bash script of one window: environment, tee to the log, open-file limit, exec the server."""
    lines = []
    if path:
        lines.append(f"export PATH={shlex.quote(path)}")
    lines += [f"export {key}={shlex.quote(value)}" for key, value in env.items()]
    tee = f"trap '' TERM HUP INT; exec tee -a {shlex.quote(log_file)}"
    lines.append(f"exec > >({tee}) 2>&1")
    lines.append(f"n={int(nofile)}; h=$(ulimit -Hn)")
    lines.append('if [ "$h" != unlimited ] && [ "$h" -lt "$n" ]; then '
                 'echo "ops: ulimit_nofile $n is above the hard limit $h on $(hostname); using $h"; n=$h; fi')
    lines.append('ulimit -Sn "$n"')
    lines.append(f"exec {shlex.join(argv)}")
    return "\n".join(lines)


class TmuxBackend(LocalLogs):
    name = "tmux"

    def __init__(self) -> None:
        self._servers: dict[str | None, libtmux.Server] = {}

    def server(self, socket: str | None) -> libtmux.Server:
        if socket not in self._servers:
            self._servers[socket] = libtmux.Server(socket_name=socket)
        return self._servers[socket]

    def tmux(self, socket: str | None, *args: str) -> list[str]:
        """Every tmux call goes through here; a failure becomes a LaunchError with tmux's message."""
        result = self.server(socket).cmd(*args)
        if result.returncode != 0:
            message = " ".join(result.stderr) or f"exit {result.returncode}"
            raise LaunchError(f"tmux {args[0]} failed: {message}")
        return list(result.stdout)

    def has_session(self, socket: str | None, session: str) -> bool:
        try:
            return self.server(socket).cmd("has-session", "-t", f"={session}").returncode == 0
        except LibTmuxException:
            return False

    def preflight(self, group: NodeGroup, ctx: LaunchContext) -> list[str]:
        problems = check_here(group)
        session = session_name(ctx.topology, group.name)
        if self.has_session(ctx.tmux_socket, session):
            problems.append(f"tmux session '{session}' already exists{_where(ctx.tmux_socket)}; "
                            f"`ops down {ctx.topology}` first (or `tmux kill-session -t {session}`)")
        return problems

    def launch(self, group: NodeGroup, ctx: LaunchContext) -> Launched:
        socket, session = ctx.tmux_socket, session_name(ctx.topology, group.name)
        node = NodeRecord(name=group.name, backend=self.name,
                          host=group.specs[0].host if group.specs else group.node.host,
                          handle={"socket": socket, "session": session})
        records: list[ProcessRecord] = []
        for spec in group.specs:
            try:
                records.append(self._start(group.name, spec, ctx, socket, session))
            except LaunchError:
                self.stop(node, records, timeout=5)
                raise
        return Launched(node, records)

    def _start(self, node: str, spec: ProcessSpec, ctx: LaunchContext, socket: str | None,
               session: str) -> ProcessRecord:
        argv = resolve_argv(spec.argv)
        log_file = absolute_log(spec, ctx.cwd)
        offset = open_log(log_file, spec.reproduce)
        script = window_script(line_buffered(argv), spec.env, str(log_file), ctx.nofile, os.environ.get("PATH"))
        fmt = "#{window_id} #{pane_pid}"
        command = ["bash", "--norc", "-c", script]  # no ~/.bashrc (bash reads it when SSH_CLIENT is set)
        if self.has_session(socket, session):
            out = self.tmux(socket, "new-window", "-d", "-P", "-F", fmt, "-t", f"={session}:",
                            "-n", spec.name, "-c", str(ctx.cwd), "--", *command)
        else:  # the first window, or every earlier one already exited and took the session along
            out = self.tmux(socket, "new-session", "-d", "-P", "-F", fmt, "-s", session, "-n", spec.name,
                            "-c", str(ctx.cwd), "-x", "200", "-y", "50", "--", *command)
        window_id, pid = out[0].split()
        log.debug("started %s in tmux window %s as pid %s", spec.name, window_id, pid)
        return make_record(spec, node, self.name, int(pid), argv, log_file, offset, handle={"window": window_id})

    def poll(self, node: NodeRecord, records: Sequence[ProcessRecord],
             log_offsets: Mapping[str, int] | None = None) -> NodeView:
        return NodeView(node=node, processes={r.name: view_here(r, alive_here(r), log_offsets) for r in records})

    def stop(self, node: NodeRecord, records: Sequence[ProcessRecord], timeout: float) -> StopReport:
        report = stop_records(records, timeout)
        socket, session = node.handle.get("socket"), node.handle.get("session")
        if session:
            if self.has_session(socket, session):
                self.server(socket).cmd("kill-session", "-t", f"={session}")
            if self.has_session(socket, session):
                report.sessions_left.append(f"{session}{_where(socket)}")
        return report

    def close(self) -> None:
        return None


def _where(socket: str | None) -> str:
    return f" on tmux socket '{socket}'" if socket else ""
