"""The supervisor of a detached `ops eval`: runs the eval as a child, reruns it with `--resume` after a
crash, requeues a SLURM job before its time limit, and keeps the story in the run dir.

    attempt 1: ops eval SUITE ARGS            (OPS_SUPERVISED=1; output appended to console.log)
    exit 0                          -> finished                           (event `finished`)
    a stop (`ops stop`, Ctrl-C)     -> stopped, no restart                (event `stopped`)
    exit 2 (bad input)              -> crashed, no restart                (event `crashed`)
    exit 5 (--max-cost reached)     -> stopped, no restart                (event `stopped`)
    exit 3 with fleet_down.json     -> waiting for the fleet              (event `waiting_for_fleet`): the models
      (the fleet is down)              it names are probed (fleetprobe.py) after 5 s, 10 s, 20 s … (at most
                                       300 s), at most `max_restarts` probes; when they answer, attempt n+1
                                       with --resume (event `restart`; it counts as a restart when the attempt
                                       finished no task), else crashed with what is still down
    SIGTERM from slurm (walltime)   -> child stops and flushes, a successor job continues (event `requeued`)
    anything else (a crash)         -> backoff, attempt n+1 with --resume (event `restart`), at most
                                       `max_restarts` times, then crashed (event `crashed`)

The successor job is the same script submitted with `--dependency=afterany:JOB` (it starts as soon
as this job ends; `scontrol requeue` holds a requeued job for about two minutes on slurm 22.05).
A requeue that finished no task counts as a restart too, so a run that cannot progress ends.
`run.json` gets `supervisor` (mode, pid, host, job id, state, restarts) and `attempts`, one entry per
attempt: `{"n", "start", "end", "host", "pid", "job_id", "resume", "exit", "signal", "reason",
"outcome", "done_before", "done_after"}` (attempts.py: what each end means). The supervisor writes
run.json only while no child runs (the child writes it at its start), and never holds the run-dir lock:
its child takes it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from orchestra_ops.errors import ConfigError
from orchestra_ops.fleet.backends.slurmctl import SlurmCli
from orchestra_ops.runner.fleetwatch import clear_fleet_down, read_fleet_down
from orchestra_ops.runner.run_events import EventLog
from orchestra_ops.runner.rundir import read_run_info, write_run_info
from orchestra_ops.runner.tee import TeeLog
from orchestra_ops.supervise.attempts import CONSOLE_FILE as CONSOLE_FILE
from orchestra_ops.supervise.attempts import classify, finished_count, new_attempt, now
from orchestra_ops.supervise.attempts import counts as attempt_counts
from orchestra_ops.supervise.fleet_probe import probe_fleet

log = logging.getLogger(__name__)

SBATCH_FILE = "eval.sbatch"  # a detached slurm run's job script (detach.py); its successors reuse it
STOP_FILE = "stop.request"  # written by `ops stop` before it signals: this SIGTERM is a user's stop
SUPERVISED_ENV = "OPS_SUPERVISED"


@dataclass
class SupervisorSettings:
    run_dir: Path
    eval_args: list[str]  # `eval SUITE …` as given (without --detach options)
    mode: str = "tmux"  # tmux | slurm
    max_restarts: int = 5
    backoff_s: float = 5.0
    backoff_max_s: float = 300.0
    notify: str | None = None
    python: str = field(default_factory=lambda: sys.executable)


def stop_requested(run_dir: Path) -> bool:
    return (run_dir / STOP_FILE).exists()


def request_stop(run_dir: Path) -> None:
    (run_dir / STOP_FILE).write_text(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} pid {os.getpid()}\n",
                                     encoding="utf-8")


class Supervisor:
    def __init__(self, settings: SupervisorSettings, tee: TeeLog) -> None:
        self.settings = settings
        self.run_dir = settings.run_dir
        self.tee = tee
        self.events = EventLog(self.run_dir, settings.notify)
        self.job_id = os.environ.get("SLURM_JOB_ID") if settings.mode == "slurm" else None
        self.host = socket.gethostname()
        self.child: subprocess.Popen[bytes] | None = None
        self.signalled: int | None = None
        self._wake = threading.Event()
        self._console_offset = 0
        self._forwarded = False
        info = read_run_info(self.run_dir) or {}
        self.attempts: list[dict[str, Any]] = list(info.get("attempts") or [])
        previous = info.get("supervisor")
        # `--detach` writes restarts 0; a requeued slurm job starts again with the count it left
        self.restarts = int(previous.get("restarts", 0)) if isinstance(previous, dict) else 0

    # signals

    def _on_signal(self, signum: int, _frame: object) -> None:
        first = self.signalled is None
        self.signalled = signum
        self._wake.set()
        child = self.child
        # a terminal's Ctrl-C reached the child already (same process group); anything else is forwarded once
        if first and child is not None and signum != signal.SIGINT:
            self._forward(child)

    def _forward(self, child: subprocess.Popen[bytes]) -> None:
        """SIGTERM to the eval, once per attempt (a second one would abort its tasks in flight)."""
        if not self._forwarded and child.poll() is None:
            self._forwarded = True
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signal.SIGTERM)

    def _is_user_stop(self) -> bool:
        if stop_requested(self.run_dir):
            return True
        # under slurm a SIGTERM nobody asked for through `ops stop` is the walltime warning
        return self.signalled is not None and not (self.job_id and self.signalled == signal.SIGTERM)

    # the loop

    def run(self) -> str:
        """Supervise until the run is finished, stopped or crashed (or requeued): the final state."""
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)
        try:
            return self._loop()
        finally:
            self.events.close()

    def _loop(self) -> str:
        while True:
            if self.signalled is not None and not self._is_user_stop():  # the walltime signal during a backoff
                return self._hand_over()
            if stop_requested(self.run_dir) or self.signalled is not None:
                return self._end("stopped", "stopped before the attempt started")
            attempt = self._start_attempt()
            assert self.child is not None
            code = self.child.wait()
            self.child = None
            outcome = classify(attempt, code, self.run_dir, self._console_offset,
                               None if self.signalled is None else self._is_user_stop())
            if outcome in ("finished", "stopped", "crashed"):
                return self._end(outcome, attempt["reason"])
            if outcome == "requeue":
                return self._requeue(attempt)
            if outcome == "wait":
                ended = self._wait_for_fleet(attempt)
                if ended is not None:
                    return ended
                continue
            if not self._restart_allowed():
                return self._end("crashed", f"{attempt['reason']}; gave up after {self.restarts} restart(s) "
                                            f"(--max-restarts {self.settings.max_restarts})")
            delay = min(self.settings.backoff_max_s, self.settings.backoff_s * 2 ** (self.restarts - 1))
            self.tee.line(f"[SUPERVISOR] attempt {attempt['n']} crashed: {attempt['reason']}")
            for line in attempt.get("last_lines", []):
                self.tee.line(f"[SUPERVISOR]   | {line}")
            self.tee.line(f"[SUPERVISOR] restart {self.restarts} of {self.settings.max_restarts} in {delay:g} s "
                          "with --resume")
            self.events.emit("restart", attempt=attempt["n"], restart=self.restarts, reason=attempt["reason"],
                             delay_s=delay, exit=attempt["exit"], signal=attempt["signal"])
            self._save("restarting")
            self._wake.wait(delay)

    def _restart_allowed(self) -> bool:
        """Count one more restart, unless the bound is reached (then False)."""
        if self.restarts >= self.settings.max_restarts:
            return False
        self.restarts += 1
        return True

    def _start_attempt(self) -> dict[str, Any]:
        done_before = finished_count(self.run_dir)
        resume = bool(self.attempts) or done_before > 0
        args = list(self.settings.eval_args)
        if resume and "--resume" not in args:
            args.append("--resume")
        attempt = new_attempt(len(self.attempts) + 1, self.host, self.job_id, resume, done_before)
        self.attempts.append(attempt)
        clear_fleet_down(self.run_dir)  # what an exit 3 of this attempt leaves is its own
        self._save("running")  # before the child starts: the child's own run.json write merges over it
        console = self.run_dir / CONSOLE_FILE
        offset = console.stat().st_size if console.exists() else 0
        self._console_offset = offset
        env = {**os.environ, SUPERVISED_ENV: "1", "PYTHONUNBUFFERED": "1"}
        self._forwarded = False
        with open(console, "ab") as out:
            self.child = subprocess.Popen([self.settings.python, "-m", "orchestra_ops", *args], stdout=out,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        if self.signalled not in (None, signal.SIGINT):  # a signal that came while the child was starting
            self._forward(self.child)
        attempt["pid"] = self.child.pid
        self._save("running")  # run.json writes are locked (rundir.py): the child's own write merges with it
        self.tee.line(f"[SUPERVISOR] attempt {attempt['n']} started: pid {self.child.pid} on {self.host}"
                      f"{' (--resume)' if resume else ''}")
        return attempt

    def _wait_for_fleet(self, attempt: dict[str, Any]) -> str | None:
        """Probe the models the attempt found down, with backoff; None when they answer (the loop resumes),
        else the run's end state (crashed when they never answered, stopped by the user, handed over)."""
        down = read_fleet_down(self.run_dir) or {}
        models = [str(m) for m in down.get("models", [])]
        bound = self.settings.max_restarts
        self._save("waiting", f"waiting for the fleet: {down.get('reason')}")
        self.events.emit("waiting_for_fleet", attempt=attempt["n"], models=models, reason=down.get("reason"))
        self.tee.line(f"[SUPERVISOR] attempt {attempt['n']}: the fleet is down ({', '.join(models)}): "
                      f"{down.get('reason')}; waiting for it (at most {bound} probe(s), with backoff)")
        detail, waited = str(down.get("reason")), 0.0
        for probe in range(1, bound + 1):
            delay = min(self.settings.backoff_max_s, self.settings.backoff_s * 2 ** (probe - 1))
            self._wake.wait(delay)
            waited += delay
            if stop_requested(self.run_dir) or (self.signalled is not None and self._is_user_stop()):
                return self._end("stopped", "stopped by the user while waiting for the fleet")
            if self.signalled is not None:  # the walltime signal: a successor job waits on
                return self._hand_over()
            answer = probe_fleet(self.settings.eval_args, models)
            if answer.back:
                return self._resume_after_wait(attempt, answer.detail)
            detail = answer.detail
            self.tee.line(f"[SUPERVISOR] probe {probe} of {bound}: still down: {detail}")
            self._save("waiting", f"waiting for the fleet (probe {probe} of {bound}): {detail}")
        return self._end("crashed", f"the fleet did not come back: {bound} probe(s) over {waited:g} s "
                                    f"(--max-restarts {bound}); still down: {detail}")

    def _resume_after_wait(self, attempt: dict[str, Any], detail: str) -> str | None:
        progressed = attempt["done_after"] > attempt["done_before"]
        if not progressed and not self._restart_allowed():
            return self._end("crashed", f"the fleet answers again, but attempt {attempt['n']} finished no task and "
                                        f"the restart bound is reached (--max-restarts {self.settings.max_restarts})")
        self.tee.line(f"[SUPERVISOR] the fleet answers again ({detail}); resuming with --resume")
        self.events.emit("restart", attempt=attempt["n"], restart=self.restarts,
                         reason=f"the fleet answers again ({detail})", delay_s=0, exit=attempt["exit"], signal=None)
        self._save("restarting")
        return None

    def _requeue(self, attempt: dict[str, Any]) -> str:
        """Before the walltime: submit the same sbatch script as a successor job (`--dependency=afterany`
        on this one, so it starts as soon as this job ends; `scontrol requeue` would hold the job ~2 min)."""
        progressed = attempt["done_after"] > attempt["done_before"]
        if not progressed and not self._restart_allowed():
            return self._end("crashed", f"{attempt['reason']}; no task finished in attempt {attempt['n']} and "
                                        f"the restart bound is reached (--max-restarts {self.settings.max_restarts})")
        return self._hand_over(attempt)

    def _hand_over(self, attempt: dict[str, Any] | None = None) -> str:
        reason = attempt["reason"] if attempt else "SIGTERM before the slurm time limit (between attempts)"
        previous = self.job_id
        result = SlurmCli().run(["sbatch", "--parsable", f"--dependency=afterany:{previous}",
                                 str(self.run_dir / SBATCH_FILE)])
        if result.returncode != 0:
            return self._end("crashed", f"{reason}; sbatch of the successor job failed: "
                                        f"{result.stderr.strip() or result.returncode}")
        self.job_id = result.stdout.strip().split(";")[0]
        label = f"attempt {attempt['n']}: " if attempt else ""
        self.tee.line(f"[SUPERVISOR] {label}{reason}; slurm job {previous} ends, job {self.job_id} continues the run")
        self.events.emit("requeued", attempt=attempt["n"] if attempt else None, job_id=self.job_id,
                         previous_job_id=previous, reason=reason, done=finished_count(self.run_dir))
        self._save("restarting")
        return "restarting"

    def _end(self, state: str, reason: str) -> str:
        counts = attempt_counts(self.run_dir)
        self.tee.line(f"[SUPERVISOR] run {state}: {reason} ({counts['done']} ok, {counts['failed']} failed; "
                      f"{len(self.attempts)} attempt(s), {self.restarts} restart(s))")
        self.events.emit(state, reason=reason, attempts=len(self.attempts), restarts=self.restarts, **counts)
        self._save(state, reason)  # last: whoever sees the end in run.json finds its log line and event written
        return state

    def _save(self, state: str, reason: str | None = None) -> None:
        supervisor = {"mode": self.settings.mode, "pid": os.getpid(), "create_time": _create_time(),
                      "host": self.host, "job_id": self.job_id, "state": state, "reason": reason,
                      "restarts": self.restarts, "max_restarts": self.settings.max_restarts, "updated": now(),
                      "updated_epoch": round(time.time(), 3)}
        previous = (read_run_info(self.run_dir) or {}).get("supervisor")
        if isinstance(previous, dict) and previous.get("tmux"):
            supervisor["tmux"] = previous["tmux"]
        write_run_info(self.run_dir, {"supervisor": supervisor, "attempts": self.attempts})


def _create_time() -> float | None:
    try:
        return psutil.Process().create_time()
    except psutil.Error:
        return None


def check_eval_args(args: Sequence[str]) -> list[str]:
    if len(args) < 2 or args[0] != "eval":
        raise ConfigError(f"the supervisor runs `ops eval SUITE …`, not `ops {' '.join(args)}`")
    return list(args)
