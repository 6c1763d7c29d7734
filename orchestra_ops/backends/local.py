"""The local backend: each process a child in its own session, output appended to its log file.

The child writes straight into the log file (opened O_APPEND, no pipe in between), with
`PYTHONUNBUFFERED=1` from the plan and `stdbuf -oL` for C stdio, so every line it printed before
it died is on disk. `ulimit -n` comes from this process's soft limit, set for the launch only.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

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


class LocalBackend:
    name = "local"

    def __init__(self) -> None:
        self._children: dict[str, subprocess.Popen[bytes]] = {}

    def launch(self, specs: Sequence[ProcessSpec], ctx: LaunchContext) -> list[ProcessRecord]:
        records: list[ProcessRecord] = []
        with procs.soft_nofile(ctx.nofile):
            for spec in specs:
                try:
                    records.append(self._start(spec, ctx))
                except OSError as exc:
                    stop_records(records, timeout=5)
                    raise LaunchError(f"{spec.name}: cannot start {spec.argv[0]!r}: {exc}") from None
        return records

    def _start(self, spec: ProcessSpec, ctx: LaunchContext) -> ProcessRecord:
        argv = resolve_argv(spec.argv)
        log_file = absolute_log(spec, ctx.cwd)
        offset = open_log(log_file, spec.reproduce)
        env = {**os.environ, **spec.env}
        with open(log_file, "ab", buffering=0) as handle:
            child = subprocess.Popen(
                line_buffered(argv), stdin=subprocess.DEVNULL, stdout=handle, stderr=subprocess.STDOUT,
                env=env, cwd=ctx.cwd, start_new_session=True, close_fds=True,
            )
        self._children[spec.name] = child
        log.debug("started %s as pid %d", spec.name, child.pid)
        return make_record(spec, child.pid, argv, log_file, offset)

    def stop(self, state: FleetState, timeout: float) -> StopReport:
        report = stop_records(state.processes, timeout)
        for child in self._children.values():
            child.poll()  # reap our own children so they do not linger as zombies
        return report

    def alive(self, record: ProcessRecord) -> bool:
        child = self._children.get(record.name)
        if child is not None and child.pid == record.pid:
            return child.poll() is None
        return procs.is_alive(record.pid, record.create_time)

    def exit_code(self, record: ProcessRecord) -> int | None:
        child = self._children.get(record.name)
        return child.poll() if child is not None and child.pid == record.pid else None

    def log_path(self, record: ProcessRecord) -> Path:
        return Path(record.log)
