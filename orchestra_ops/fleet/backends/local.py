"""The local backend: each process a child in its own session, output appended to its log file.

The child writes straight into the log file (opened O_APPEND, no pipe in between), with
`PYTHONUNBUFFERED=1` from the plan and `stdbuf -oL` for C stdio, so every line it printed before
it died is on disk. `ulimit -n` comes from this process's soft limit, set for the launch only.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
from collections.abc import Mapping, Sequence

from orchestra_ops.core import procs
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
_RLIMIT_LOCK = threading.Lock()  # the soft limit is per process: one launch at a time sets it


class LocalBackend(LocalLogs):
    name = "local"

    def __init__(self) -> None:
        self._children: dict[tuple[str, int], subprocess.Popen[bytes]] = {}

    def preflight(self, group: NodeGroup, ctx: LaunchContext) -> list[str]:
        return check_here(group)

    def launch(self, group: NodeGroup, ctx: LaunchContext) -> Launched:
        records: list[ProcessRecord] = []
        nofile = procs.nofile_limit(ctx.nofile).effective
        with _RLIMIT_LOCK, procs.soft_nofile(nofile):
            for spec in group.specs:
                try:
                    records.append(self._start(group.name, spec, ctx))
                except OSError as exc:
                    stop_records(records, timeout=5)
                    raise LaunchError(f"{spec.name}: cannot start {spec.argv[0]!r}: {exc}") from None
        host = group.specs[0].host if group.specs else group.node.host
        return Launched(NodeRecord(name=group.name, backend=self.name, host=host), records)

    def _start(self, node: str, spec: ProcessSpec, ctx: LaunchContext) -> ProcessRecord:
        argv = resolve_argv(spec.argv)
        log_file = absolute_log(spec, ctx.cwd)
        offset = open_log(log_file, spec.reproduce)
        env = {**os.environ, **spec.env}
        with open(log_file, "ab", buffering=0) as handle:
            child = subprocess.Popen(
                line_buffered(argv), stdin=subprocess.DEVNULL, stdout=handle, stderr=subprocess.STDOUT,
                env=env, cwd=ctx.cwd, start_new_session=True, close_fds=True,
            )
        self._children[(spec.name, child.pid)] = child
        log.debug("started %s as pid %d", spec.name, child.pid)
        return make_record(spec, node, self.name, child.pid, argv, log_file, offset)

    def poll(self, node: NodeRecord, records: Sequence[ProcessRecord],
             log_offsets: Mapping[str, int] | None = None) -> NodeView:
        views = {}
        for record in records:
            child = self._children.get((record.name, record.pid or -1))
            code = child.poll() if child is not None else None
            alive = code is None if child is not None else alive_here(record)
            views[record.name] = view_here(record, alive, log_offsets, exit_code=code)
        return NodeView(node=node, processes=views)

    def stop(self, node: NodeRecord, records: Sequence[ProcessRecord], timeout: float) -> StopReport:
        report = stop_records(records, timeout)
        for child in self._children.values():
            child.poll()  # reap our own children so they do not linger as zombies
        return report

    def close(self) -> None:
        return None
