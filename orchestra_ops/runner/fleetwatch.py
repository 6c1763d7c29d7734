"""FleetWatch: a fleet that vanished stops the run instead of failing it, task after task.

A call whose model had every replica down for the pool's whole wait (`--fleet-wait`, a CallError of
kind `no_replica`: client/pool.py) says the model is gone, not that its task failed. The first such
call stops the run: no new task starts, the tasks in flight are cancelled and stay missing (not
failed: `--resume` runs them), a `fleet_vanished` event is sent, and the eval ends with
FleetUnavailable (exit 3) naming what is down. Calls that failed before the pool gave up (a
connection reset mid-answer, say) are recorded as their tasks made them.

Both ways a run meets a fleet that is down (the preflight at the start, this mid-run stop) leave
`fleet_down.json` in the run dir: the models that are down and why. The supervisor of a detached run
reads it after an exit 3 to know what to probe before it resumes (supervisor.py, fleetprobe.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestra_ops.client.chat import CallEvent
from orchestra_ops.core.fsutil import atomic_write_text
from orchestra_ops.errors import FleetUnavailable
from orchestra_ops.runner.engine import Controller
from orchestra_ops.runner.run_events import EventLog

NO_REPLICA = "no_replica"  # the CallError kind of a pool that gave up waiting for a replica
FLEET_DOWN_FILE = "fleet_down.json"


@dataclass
class FleetWatch:
    run_dir: Path
    controller: Controller
    events: EventLog
    vanished: FleetUnavailable | None = None

    def note(self, event: CallEvent) -> None:
        """Every model call's event: the first `no_replica` stops the run (see the module doc)."""
        if event.status != NO_REPLICA or self.vanished is not None:
            return
        in_flight = len(self.controller.tasks)
        detail = event.error or f"every replica of '{event.model}' is down"
        self.vanished = FleetUnavailable(
            f"the fleet vanished: {detail}; the run stopped: no new tasks, and the {in_flight} task(s) in flight "
            "stay missing (not failed); bring the fleet back (`ops up`, or start the servers the endpoints file "
            f"lists), then continue with --resume (run dir {self.run_dir})", [event.model])
        write_fleet_down(self.run_dir, [event.model], detail)
        self.events.emit("fleet_vanished", model=event.model, role=event.role, reason=detail, in_flight=in_flight)
        self.controller.fail(self.vanished)
        current = asyncio.current_task()
        if current is not None:  # the task that made the call: its next await ends it, nothing is recorded
            current.cancel()


@contextlib.contextmanager
def fleet_down_recorded(run_dir: Path) -> Iterator[None]:
    """A FleetUnavailable raised inside (the preflight) leaves fleet_down.json behind, as a mid-run stop does."""
    try:
        yield
    except FleetUnavailable as exc:
        lines = str(exc).splitlines()
        write_fleet_down(run_dir, exc.models, "; ".join(lines[1:-1]) or str(exc))  # the `role … -> model …` lines
        raise


def write_fleet_down(run_dir: Path, models: Sequence[str], reason: str) -> None:
    with contextlib.suppress(OSError):  # a status file: the exit code says the same
        atomic_write_text(run_dir / FLEET_DOWN_FILE, json.dumps(
            {"models": list(models), "reason": reason, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, indent=2) + "\n")


def read_fleet_down(run_dir: Path) -> dict[str, Any] | None:
    """fleet_down.json (None when absent or unreadable)."""
    try:
        data = json.loads((run_dir / FLEET_DOWN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("models"), list) else None


def clear_fleet_down(run_dir: Path) -> None:
    (run_dir / FLEET_DOWN_FILE).unlink(missing_ok=True)
