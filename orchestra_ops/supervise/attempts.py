"""One attempt of a supervised eval: its record in run.json and what its end means (supervisor.py).

    exit 0                        -> finished
    a signal the user sent        -> stopped   (`ops stop`, Ctrl-C)
    a signal nobody asked for     -> requeue   (slurm's SIGTERM before the time limit)
    exit 2 (bad input)            -> crashed
    exit 130 (interrupted)        -> stopped
    exit 5 (--max-cost reached)   -> stopped
    exit 3 with fleet_down.json   -> wait      (the fleet is down: runner/fleetwatch.py)
    anything else                 -> restart

An attempt is `{"n", "start", "end", "host", "pid", "job_id", "resume", "exit", "signal", "reason",
"outcome", "done_before", "done_after", "last_lines"}`.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

from orchestra_ops.runner.fleetwatch import read_fleet_down
from orchestra_ops.runner.results import ResultsStore

CONSOLE_FILE = "console.log"  # the child evals' own stdout and stderr
BAD_INPUT_EXIT = 2
FLEET_DOWN_EXIT = 3
SPEND_LIMIT_EXIT = 5
INTERRUPTED_EXIT = 130
TAIL_LINES = 5


def new_attempt(n: int, host: str, job_id: str | None, resume: bool, done_before: int) -> dict[str, Any]:
    return {"n": n, "start": now(), "end": None, "host": host, "pid": None, "job_id": job_id, "resume": resume,
            "exit": None, "signal": None, "reason": None, "outcome": None, "done_before": done_before,
            "done_after": None}


def classify(attempt: dict[str, Any], code: int, run_dir: Path, console_offset: int,
             user_stop: bool | None) -> str:
    """Record how the attempt ended (`code`: its exit status, negative for a signal) and return its outcome.

    `user_stop`: None when no signal reached the supervisor, else whether it was the user's stop."""
    attempt["end"] = now()
    attempt["exit"] = code if code >= 0 else None
    attempt["signal"] = signal.Signals(-code).name if code < 0 else None
    attempt["done_after"] = finished_count(run_dir)
    attempt["last_lines"] = tail(run_dir / CONSOLE_FILE, console_offset)
    status = f"killed by {attempt['signal']}" if code < 0 else f"exit {code}"
    if code == 0:
        outcome, reason = "finished", "exit 0"
    elif user_stop is True:
        outcome, reason = "stopped", f"stopped by the user ({status})"
    elif user_stop is False:
        outcome, reason = "requeue", f"SIGTERM before the slurm time limit ({status})"
    elif code == BAD_INPUT_EXIT:
        outcome, reason = "crashed", f"bad input ({status}); not restarted"
    elif code == INTERRUPTED_EXIT:
        outcome, reason = "stopped", f"the eval was interrupted ({status}); not restarted"
    elif code == SPEND_LIMIT_EXIT:
        outcome, reason = "stopped", f"the spend limit was reached ({status}); not restarted"
    elif code == FLEET_DOWN_EXIT and read_fleet_down(run_dir) is not None:
        outcome, reason = "wait", f"the fleet is down ({status})"
    else:
        outcome, reason = "restart", status
    said = outcome in ("restart", "crashed", "wait") or code == SPEND_LIMIT_EXIT
    last = attempt["last_lines"][-1] if attempt["last_lines"] and said else ""
    attempt["reason"] = f"{reason}: {last}" if last else reason
    attempt["outcome"] = outcome
    return outcome


def finished_count(run_dir: Path) -> int:
    return len(ResultsStore(run_dir).final)


def counts(run_dir: Path) -> dict[str, int]:
    final = ResultsStore(run_dir).final
    ok = sum(1 for status in final.values() if status == "ok")
    return {"done": ok, "failed": len(final) - ok}


def tail(path: Path, offset: int, lines: int = TAIL_LINES) -> list[str]:
    """The last non-blank lines written to `path` after `offset`."""
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            text = handle.read()[-20_000:].decode(errors="replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if line.strip()][-lines:]


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
