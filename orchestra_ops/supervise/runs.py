"""`ops runs` and `ops stop`: every run under a runs root, its state, and the clean way to stop one.

A run's state comes from what its processes wrote, checked against what is still alive:

    running     the eval (or its supervisor) is alive and tasks finish
    stalled     alive, but the eval's watchdog reported a stall (live.json `stall`)
    restarting  the supervisor waits to rerun a crashed eval (backoff), or a requeued slurm job waits
    stopped     stopped by the user (`ops stop`, Ctrl-C), or a plain run that ended early
    crashed     the restart bound was reached, bad input, or the process that ran it is gone
    finished    every unit has a result and the eval exited 0

`run.json` `supervisor` (supervisor.py) wins over `live.json` (runner/monitor.py, written by the eval
itself), except that a supervised run whose eval says `stalled` is stalled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from orchestra_ops.core import procs
from orchestra_ops.core.headline import stored_headline
from orchestra_ops.errors import ConfigError, LaunchError
from orchestra_ops.fleet.backends.slurmctl import JobInfo, SlurmCli
from orchestra_ops.runner.monitor import LIVE_FILE, elapsed_s
from orchestra_ops.runner.results import RESULTS_FILE, ResultsStore
from orchestra_ops.runner.rundir import RUN_FILE, SCORES_FILE, read_json_object, read_run_info, write_run_info
from orchestra_ops.supervise.supervisor import request_stop

ACTIVE = frozenset({"starting", "running", "stalled", "restarting"})
DONE = frozenset({"stopped", "crashed", "finished"})


@dataclass
class RunRow:
    run_dir: str
    name: str
    suite: str | None
    topology: str | None
    state: str
    done: int
    failed: int
    total: int | None
    rate: float | None
    eta_s: float | None
    where: str
    attempts: int
    restarts: int
    reason: str | None = None
    stall: dict[str, Any] | None = None
    score: str | None = None  # the headline of scores.json: each model's score ± its 95 % interval
    elapsed_s: float | None = None  # wall time over every invocation of the run dir

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def find_runs(root: str | Path) -> list[Path]:
    base = Path(root)
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if p.is_dir() and ((p / RUN_FILE).exists() or (p / RESULTS_FILE).exists()))


def resolve_run(run: str, root: str | Path = "runs") -> Path:
    """A run dir given as a path, or as a name under the runs root."""
    for candidate in (Path(run), Path(root) / run):
        if candidate.is_dir() and ((candidate / RUN_FILE).exists() or (candidate / RESULTS_FILE).exists()):
            return candidate
    raise ConfigError(f"{run}: no such run (neither a run dir nor a run under {root}/); `ops runs` lists them")


def run_row(run_dir: Path, slurm: SlurmCli | None = None) -> RunRow:
    info = read_run_info(run_dir) or {}
    live = read_json_object(run_dir / LIVE_FILE) or {}
    supervisor = info.get("supervisor") if isinstance(info.get("supervisor"), dict) else None
    final = ResultsStore(run_dir).final
    done = sum(1 for status in final.values() if status == "ok")
    total = live.get("total") if isinstance(live.get("total"), int) else None  # None: the eval has not said yet
    state, where, reason = _state(run_dir, supervisor, live, slurm)
    attempts = info.get("attempts")
    attempts = attempts if isinstance(attempts, list) else []
    active = state in ("running", "stalled")
    return RunRow(run_dir=str(run_dir), name=run_dir.name, suite=info.get("suite"), topology=info.get("topology"),
                  state=state, done=done, failed=len(final) - done, total=total,
                  rate=live.get("rate") if active else None, eta_s=live.get("eta_s") if active else None,
                  where=where, attempts=len(attempts), restarts=int((supervisor or {}).get("restarts", 0)),
                  reason=reason, stall=live.get("stall") if state == "stalled" else None,
                  score=run_score(run_dir), elapsed_s=elapsed_s(live, active=active))


def run_score(run_dir: Path) -> str | None:
    """Each model's score ± its interval, one line each, as the run's scores.json has it (None: no scores yet)."""
    headline = stored_headline(read_json_object(run_dir / SCORES_FILE))
    if headline is None:
        return None
    return "\n".join(headline.parts()[: len(headline.scores)]) or headline.note or None


def _state(run_dir: Path, supervisor: dict[str, Any] | None, live: dict[str, Any],
           slurm: SlurmCli | None) -> tuple[str, str, str | None]:
    if supervisor is not None:
        state = str(supervisor.get("state", "starting"))
        reason = supervisor.get("reason")
        if supervisor.get("mode") == "slurm":
            job = str(supervisor.get("job_id"))
            where = f"job {job}"
            if state in ACTIVE:
                info = _job(job, slurm)
                if info is not None and not info.active:
                    return "crashed", where, f"slurm job {job} is {info.state} but the run is not over"
                if info is not None and info.waiting:
                    state = "restarting" if state != "starting" else state
                if info is not None and info.nodes:
                    where = f"job {job}@{info.nodes}"
        else:
            where = f"{supervisor.get('pid')}@{supervisor.get('host')}"
            if state in ACTIVE and not _alive_here(supervisor):
                return "crashed", where, "the supervisor is gone"
        if state == "running" and live.get("state") == "stalled":
            state = "stalled"
        return state, where, reason
    if not live:  # a run of an older ops: only its results say anything
        return "stopped", "-", None
    where = f"{live.get('pid')}@{live.get('host')}"
    state = str(live.get("state"))
    if state in ACTIVE and not _alive_here(live):
        return "crashed", where, "the eval process is gone"
    return state, where, None


_JOBS: dict[str, tuple[float, JobInfo | None]] = {}
JOB_CACHE_S = 5.0  # `ops attach` redraws twice a second: ask slurmctld at most every 5 s per job


def _job(job: str, slurm: SlurmCli | None) -> JobInfo | None:
    cached = _JOBS.get(job)
    if cached is not None and time.monotonic() - cached[0] < JOB_CACHE_S:
        return cached[1]
    try:
        info = (slurm or SlurmCli()).jobs([job]).get(job)
    except LaunchError:  # no slurm commands here (a copy of the run dir): the state as recorded
        info = None
    _JOBS[job] = (time.monotonic(), info)
    return info


def _alive_here(record: dict[str, Any]) -> bool:
    """Is the recorded process alive? (another host's process is taken at its word)"""
    if record.get("host") not in (None, socket.gethostname()):
        return True
    pid = record.get("pid")
    return isinstance(pid, int) and procs.is_alive(pid, record.get("create_time"))


def list_runs(root: str | Path) -> list[RunRow]:
    slurm = SlurmCli()
    return [run_row(run_dir, slurm) for run_dir in find_runs(root)]


def stop_run(run_dir: Path, *, wait_s: float = 120.0) -> RunRow:
    """The clean stop: no new tasks, those in flight finish, results flushed, no restart (the SIGTERM path)."""
    row = run_row(run_dir)
    if row.state not in ACTIVE:
        raise ConfigError(f"{run_dir} is not running (state {row.state}); nothing to stop")
    info = read_run_info(run_dir) or {}
    supervisor = info.get("supervisor") if isinstance(info.get("supervisor"), dict) else None
    request_stop(run_dir)
    if supervisor is not None and supervisor.get("mode") == "slurm":
        if _stop_slurm(str(supervisor.get("job_id"))):  # it had not started: nothing will write its end
            write_run_info(run_dir, {"supervisor": {**supervisor, "state": "stopped",
                                                    "reason": "stopped by the user before the job started"}})
    else:
        record = supervisor if supervisor is not None else read_json_object(run_dir / LIVE_FILE) or {}
        _signal_here(record)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        row = run_row(run_dir)
        if row.state not in ACTIVE:
            return row
        time.sleep(0.5)
    return row


def _stop_slurm(job: str) -> bool:
    """SIGTERM to the job's batch shell (the supervisor); a job still waiting is cancelled (then True)."""
    cli = SlurmCli()
    info = cli.jobs([job]).get(job)
    waiting = info is not None and info.waiting
    if waiting:
        error = cli.cancel([job])
    else:
        result = cli.run(["scancel", "--batch", "--signal=TERM", job])
        error = None if result.returncode == 0 else result.stderr.strip()
    if error:
        raise LaunchError(f"could not signal slurm job {job}: {error}")
    _JOBS.pop(job, None)
    return waiting


def _signal_here(record: dict[str, Any]) -> None:
    pid = record.get("pid")
    if record.get("host") not in (None, socket.gethostname()):
        raise ConfigError(f"the run is on {record.get('host')}; run `ops stop` there")
    if not isinstance(pid, int) or not procs.is_alive(pid, record.get("create_time")):
        raise ConfigError("the run's process is gone; nothing to stop")
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
