"""What state a run is in: what its processes wrote, checked against what is still alive.

Two writers speak for a run: the supervisor of a detached run (run.json `supervisor`, supervisor.py)
and the eval itself (live.json, runner/monitor.py; `supervised` says which kind of eval wrote it).
The supervisor's word wins, except where a foreground eval speaks for the run: one that is alive
now, or one that started after the supervisor last wrote (a detached run stopped, then resumed in a
terminal: `running`, then `finished`, and `ops stop` stops that eval). A supervised run whose eval
says `stalled` is stalled.

A slurm supervisor's job is checked with squeue; a controller that cannot be asked (no
configuration, not running, no answer within `SLURM_TIMEOUT_S`) leaves the state as recorded,
marked unconfirmed (never `crashed`), and is not asked again for `UNREACHABLE_CACHE_S`.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from orchestra_ops.core import procs
from orchestra_ops.errors import LaunchError
from orchestra_ops.fleet.backends.slurmctl import JobInfo, SlurmCli

ACTIVE = frozenset({"starting", "running", "stalled", "restarting", "waiting"})
DONE = frozenset({"stopped", "crashed", "finished"})
JOB_CACHE_S = 5.0  # `ops attach` redraws twice a second: ask slurmctld at most every 5 s per job
UNREACHABLE_CACHE_S = 30.0  # a controller that did not answer is not asked again for this long
SLURM_TIMEOUT_S = 10.0  # squeue retries a missing configuration for 60 s: `ops runs` waits this long


@dataclass
class Belief:
    state: str
    where: str
    reason: str | None = None
    record: dict[str, Any] | None = None  # the process that speaks for the run (what `ops stop` signals)
    job: str | None = None  # or the slurm job of a supervisor in slurm mode
    unconfirmed: str | None = None  # why the recorded state could not be checked


def believe(supervisor: dict[str, Any] | None, live: dict[str, Any], slurm: SlurmCli | None = None) -> Belief:
    """The run's state from run.json's `supervisor` (None: never detached) and live.json (empty: none yet)."""
    if supervisor is not None and not _foreground_speaks(supervisor, live):
        return _supervised(supervisor, live, slurm)
    if not live:  # a run of an older ops: only its results say anything
        return Belief("stopped", "-")
    where = f"{live.get('pid')}@{live.get('host')}"
    state = str(live.get("state"))
    if state in ACTIVE and not alive_here(live):
        return Belief("crashed", where, "the eval process is gone", record=live)
    return Belief(state, where, live.get("reason"), record=live)


def _foreground_speaks(supervisor: dict[str, Any], live: dict[str, Any]) -> bool:
    if live.get("supervised") is not False:  # a supervised eval's live.json, or one from an older ops
        return False
    if str(live.get("state")) in ACTIVE and alive_here(live):
        return True
    started, updated = live.get("started_epoch"), _epoch(supervisor)
    return isinstance(started, (int, float)) and updated is not None and started >= updated


def _supervised(supervisor: dict[str, Any], live: dict[str, Any], slurm: SlurmCli | None) -> Belief:
    state = str(supervisor.get("state", "starting"))
    belief = Belief(state, f"{supervisor.get('pid')}@{supervisor.get('host')}", supervisor.get("reason"),
                    record=supervisor)
    if supervisor.get("mode") == "slurm":
        job = str(supervisor.get("job_id"))
        belief.record, belief.job, belief.where = None, job, f"job {job}"
        if state in ACTIVE:
            info, belief.unconfirmed = job_info(job, slurm)
            if info is not None and not info.active:
                belief.state, belief.reason = "crashed", f"slurm job {job} is {info.state} but the run is not over"
                return belief
            if info is not None and info.waiting:
                belief.state = "restarting" if state != "starting" else state
            if info is not None and info.nodes:
                belief.where = f"job {job}@{info.nodes}"
    elif state in ACTIVE and not alive_here(supervisor):
        belief.state, belief.reason = "crashed", "the supervisor is gone"
        return belief
    if belief.state == "running" and live.get("state") == "stalled":
        belief.state = "stalled"
    return belief


_JOBS: dict[str, tuple[float, JobInfo | None, str | None]] = {}
_UNREACHABLE: list[tuple[float, str]] = []  # the last controller failure (at most one entry)


def job_info(job: str, slurm: SlurmCli | None) -> tuple[JobInfo | None, str | None]:
    """(the job's state, None), or (None, why slurm could not say) when the controller cannot be asked."""
    now = time.monotonic()
    cached = _JOBS.get(job)
    if cached is not None and now - cached[0] < JOB_CACHE_S:
        return cached[1], cached[2]
    if _UNREACHABLE and now - _UNREACHABLE[0][0] < UNREACHABLE_CACHE_S:
        return None, _UNREACHABLE[0][1]
    info, why = None, None
    try:
        info = (slurm or SlurmCli()).jobs([job], timeout=SLURM_TIMEOUT_S).get(job)
    except LaunchError as exc:  # no slurm commands here, no configuration, slurmctld down or silent
        why = str(exc)
        _UNREACHABLE[:] = [(time.monotonic(), why)]
    _JOBS[job] = (time.monotonic(), info, why)
    return info, why


def forget_job(job: str) -> None:
    _JOBS.pop(job, None)


def alive_here(record: dict[str, Any]) -> bool:
    """Is the recorded process alive? (another host's process is taken at its word)"""
    if record.get("host") not in (None, socket.gethostname()):
        return True
    pid = record.get("pid")
    return isinstance(pid, int) and procs.is_alive(pid, record.get("create_time"))


def _epoch(supervisor: dict[str, Any]) -> float | None:
    """When the supervisor last wrote its record (`updated_epoch`, else its ISO `updated`)."""
    epoch = supervisor.get("updated_epoch")
    if isinstance(epoch, (int, float)):
        return float(epoch)
    try:
        return datetime.strptime(str(supervisor.get("updated")), "%Y-%m-%dT%H:%M:%S%z").timestamp()
    except ValueError:
        return None
