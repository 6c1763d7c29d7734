"""`ops runs` and `ops stop`: every run under a runs root, its state, and the clean way to stop one.

A run's state (runstate.py decides it from what its processes wrote, checked against what is alive):

    running     the eval (or its supervisor) is alive and tasks finish
    stalled     alive, but the eval's watchdog reported a stall (live.json `stall`)
    restarting  the supervisor waits to rerun a crashed eval (backoff), or a requeued slurm job waits
    waiting     the fleet is down: the supervisor probes it and resumes the run when it answers
    stopped     stopped by the user (`ops stop`, Ctrl-C), by a limit (--max-cost), by a fleet that vanished
                under a plain run, or a plain run that ended early
    crashed     the restart bound was reached, bad input, or the process that ran it is gone
    finished    every unit has a result and the eval exited 0
    unreadable  its run.json or live.json cannot be read (the row says which and why; the others are listed)

A state that could not be checked (a slurm controller that does not answer) is the one recorded,
with `unconfirmed` saying why.
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

from orchestra_ops.core.headline import stored_headline
from orchestra_ops.errors import ConfigError, LaunchError
from orchestra_ops.fleet.backends.slurmctl import SlurmCli
from orchestra_ops.runner.monitor import LIVE_FILE, elapsed_s
from orchestra_ops.runner.results import RESULTS_FILE, ResultsStore
from orchestra_ops.runner.rundir import RUN_FILE, SCORES_FILE, read_json_object, read_run_info, write_run_info
from orchestra_ops.supervise.run_state import ACTIVE as ACTIVE
from orchestra_ops.supervise.run_state import DONE as DONE
from orchestra_ops.supervise.run_state import alive_here, believe, forget_job
from orchestra_ops.supervise.supervisor import request_stop


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
    unconfirmed: str | None = None  # the state is the one recorded: why it could not be checked

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
    belief = believe(supervisor, live, slurm)
    attempts = info.get("attempts")
    attempts = attempts if isinstance(attempts, list) else []
    active = belief.state in ("running", "stalled")
    return RunRow(run_dir=str(run_dir), name=run_dir.name, suite=info.get("suite"), topology=info.get("topology"),
                  state=belief.state, done=done, failed=len(final) - done, total=total,
                  rate=live.get("rate") if active else None, eta_s=live.get("eta_s") if active else None,
                  where=belief.where, attempts=len(attempts), restarts=int((supervisor or {}).get("restarts", 0)),
                  reason=belief.reason, stall=live.get("stall") if belief.state == "stalled" else None,
                  unconfirmed=belief.unconfirmed, score=run_score(run_dir), elapsed_s=elapsed_s(live, active=active))


def run_score(run_dir: Path) -> str | None:
    """Each model's score ± its interval, one line each, as the run's scores.json has it (None: no scores yet)."""
    headline = stored_headline(read_json_object(run_dir / SCORES_FILE))
    if headline is None:
        return None
    return "\n".join(headline.parts()[: len(headline.scores)]) or headline.note or None


def unreadable_row(run_dir: Path, error: Exception) -> RunRow:
    """A run whose files cannot be read: listed as such (never hiding the other runs)."""
    return RunRow(run_dir=str(run_dir), name=run_dir.name, suite=None, topology=None, state="unreadable", done=0,
                  failed=0, total=None, rate=None, eta_s=None, where="-", attempts=0, restarts=0,
                  reason=str(error).splitlines()[0] if str(error) else type(error).__name__)


def list_runs(root: str | Path) -> list[RunRow]:
    slurm = SlurmCli()
    rows = []
    for run_dir in find_runs(root):
        try:
            rows.append(run_row(run_dir, slurm))
        except (ConfigError, OSError) as exc:  # a damaged run.json or live.json, a file we may not read
            rows.append(unreadable_row(run_dir, exc))
    return rows


def stop_run(run_dir: Path, *, wait_s: float = 120.0) -> RunRow:
    """The clean stop: no new tasks, those in flight finish, results flushed, no restart (the SIGTERM path)
    of the process that speaks for the run: its supervisor, its slurm job, or an eval run in a terminal."""
    info = read_run_info(run_dir) or {}
    supervisor = info.get("supervisor") if isinstance(info.get("supervisor"), dict) else None
    belief = believe(supervisor, read_json_object(run_dir / LIVE_FILE) or {})
    if belief.state not in ACTIVE:
        raise ConfigError(f"{run_dir} is not running (state {belief.state}); nothing to stop")
    if belief.job is not None:
        if _stop_slurm(belief.job, run_dir) and supervisor is not None:  # not started: nothing will write its end
            write_run_info(run_dir, {"supervisor": {**supervisor, "state": "stopped",
                                                    "reason": "stopped by the user before the job started"}})
    else:
        _check_signallable(belief.record or {})
        request_stop(run_dir)
        _signal(belief.record or {})
    deadline = time.monotonic() + wait_s
    row = run_row(run_dir)
    while time.monotonic() < deadline:
        row = run_row(run_dir)
        if row.state not in ACTIVE:
            return row
        time.sleep(0.5)
    return row


def _stop_slurm(job: str, run_dir: Path) -> bool:
    """SIGTERM to the job's batch shell (the supervisor); a job still waiting is cancelled (then True).
    The controller is asked first: when it cannot be (Unreachable, exit 3), no stop is left pending."""
    cli = SlurmCli()
    info = cli.jobs([job]).get(job)
    waiting = info is not None and info.waiting
    request_stop(run_dir)
    if waiting:
        error = cli.cancel([job])
    else:
        result = cli.run(["scancel", "--batch", "--signal=TERM", job])
        error = None if result.returncode == 0 else result.stderr.strip()
    if error:
        raise LaunchError(f"could not signal slurm job {job}: {error}")
    forget_job(job)
    return waiting


def _check_signallable(record: dict[str, Any]) -> None:
    if record.get("host") not in (None, socket.gethostname()):
        raise ConfigError(f"the run is on {record.get('host')}; run `ops stop` there")
    if not isinstance(record.get("pid"), int) or not alive_here(record):
        raise ConfigError("the run's process is gone; nothing to stop")


def _signal(record: dict[str, Any]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(int(record["pid"]), signal.SIGTERM)
