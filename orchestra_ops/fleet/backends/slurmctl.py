"""Every slurm command `ops` runs goes through `SlurmCli.run` (one choke point, counted, logged).

Job state comes from `squeue -t all -j IDS` (one call for every job of a fleet) and, for a job
squeue no longer lists, `scontrol show job` (no `sacct`: many clusters have no accounting
database). A job both forget (past MinJobAge) is reported as GONE. A controller that cannot be asked
(no configuration, not running, a timeout) is never taken for a job that is gone: `Unreachable`.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from orchestra_ops.errors import LaunchError, Unreachable

log = logging.getLogger(__name__)

COMMANDS = ("sbatch", "squeue", "scontrol", "scancel")
WAITING = frozenset({"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD",
                     "SUSPENDED", "STOPPED", "SIGNALING", "RESIZING"})
RUNNING = "RUNNING"
COMPLETING = "COMPLETING"
GONE = "GONE"  # neither squeue nor scontrol knows the job any more
UNKNOWN_JOB = "Invalid job id"  # what squeue and scontrol say of a job they do not know (the controller answered)


@dataclass(frozen=True)
class JobInfo:
    job_id: str
    state: str  # PENDING, RUNNING, COMPLETING, COMPLETED, CANCELLED, FAILED, TIMEOUT, … or GONE
    reason: str = ""
    nodes: str = ""
    start_time: float | None = None

    @property
    def waiting(self) -> bool:
        return self.state in WAITING

    @property
    def running(self) -> bool:
        return self.state == RUNNING

    @property
    def active(self) -> bool:
        """Anything of the job may still run (waiting, running, or its processes being killed)."""
        return self.waiting or self.running or self.state == COMPLETING

    def describe(self) -> str:
        reason = f" ({self.reason})" if self.reason and self.reason != "None" else ""
        return f"slurm job {self.job_id} {self.state}{reason}"


class SlurmCli:
    """Runs slurm commands; `calls` counts them by command (the benchmark and the logs read it)."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def missing(self) -> list[str]:
        return [command for command in COMMANDS if shutil.which(command) is None]

    def run(self, args: Sequence[str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        self.calls[args[0]] += 1
        log.debug("slurm: %s", " ".join(args))
        try:
            return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, check=False)
        except FileNotFoundError:
            raise LaunchError(f"{args[0]} not found: run `ops up` where the slurm commands are (a login node)"
                              ) from None
        except subprocess.TimeoutExpired:
            raise Unreachable(f"`{' '.join(args[:2])}` did not answer in {timeout:.0f} s: is slurmctld up?") from None

    def submit(self, script: str) -> str:
        """`sbatch --parsable SCRIPT` -> the job id; a refusal raises LaunchError with sbatch's words."""
        result = self.run(["sbatch", "--parsable", script])
        if result.returncode != 0:
            message = result.stderr.strip().removeprefix("sbatch: error: ") or f"exit {result.returncode}"
            raise LaunchError(f"sbatch refused the job: {message}")
        return result.stdout.strip().split(";")[0]

    def partitions(self) -> list[str] | None:
        """The cluster's partition names (None when scontrol cannot say)."""
        result = self.run(["scontrol", "show", "partition", "-o"])
        if result.returncode != 0:
            return None
        return re.findall(r"PartitionName=(\S+)", result.stdout)

    def jobs(self, job_ids: Iterable[str], timeout: float = 60.0) -> dict[str, JobInfo]:
        """The state of every job in `job_ids`, with one squeue call (and scontrol for the ones it forgot).

        Unreachable (exit 3) when the controller cannot be asked: a job is GONE only when slurm says so."""
        ids = sorted(set(job_ids), key=lambda j: (len(j), j))
        if not ids:
            return {}
        result = self.run(["squeue", "-h", "-t", "all", "-j", ",".join(ids), "-o", "%i|%T|%r|%N|%S"], timeout)
        _check_answered(result)
        found: dict[str, JobInfo] = {}
        if result.returncode == 0:
            for line in result.stdout.splitlines():
                parts = line.strip().split("|")
                if len(parts) == 5 and parts[0] in ids:
                    found[parts[0]] = JobInfo(parts[0], parts[1], parts[2], parts[3], _time(parts[4]))
        for job in ids:
            if job not in found:
                found[job] = self.show(job, timeout)
        return found

    def show(self, job_id: str, timeout: float = 60.0) -> JobInfo:
        result = self.run(["scontrol", "show", "job", "-o", job_id], timeout)
        _check_answered(result)
        if result.returncode != 0:
            return JobInfo(job_id, GONE)
        fields = dict(re.findall(r"(\w+)=(\S*)", result.stdout))
        nodes = fields.get("NodeList", "")
        return JobInfo(job_id, fields.get("JobState", GONE), fields.get("Reason", ""),
                       "" if nodes == "(null)" else nodes, _time(fields.get("StartTime", "")))

    def cancel(self, job_ids: Sequence[str], *, kill: bool = False) -> str | None:
        """scancel the jobs (`kill`: SIGKILL every process of them now); an error message, or None."""
        args = ["scancel", *(["--signal=KILL", "--full"] if kill else []), *job_ids]
        result = self.run(args)
        return None if result.returncode == 0 else (result.stderr.strip() or f"exit {result.returncode}")


def _check_answered(result: subprocess.CompletedProcess[str]) -> None:
    """A failed squeue/scontrol that is not slurm saying "no such job" could not ask the controller."""
    if result.returncode == 0 or UNKNOWN_JOB.lower() in result.stderr.lower():
        return
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    said = lines[-1] if lines else f"exit {result.returncode}"
    raise Unreachable(f"`{' '.join(result.args[:2])}` could not ask the slurm controller: {said}")


def _time(text: str) -> float | None:
    try:
        return time.mktime(datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").timetuple())
    except ValueError:
        return None
