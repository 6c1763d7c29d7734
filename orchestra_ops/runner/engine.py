"""The task loop: at most `concurrency` tasks in flight, each bounded by a deadline.

Ctrl-C (or SIGTERM) once: no new task starts; tasks in flight finish or hit their deadline.
Ctrl-C twice: tasks in flight are cancelled (not recorded, so resume reruns them).
A full disk or a fleet that vanished (`Controller.fail`): no new task, those in flight cancelled, nothing
more recorded. A limit reached (`Controller.halt`, --max-cost): no new task, those in flight finish.
Every finished task, ok or error, becomes exactly one record passed to `on_done`; a task that
raises `UnitFailed` (a failure with work worth keeping: its rounds, its tool calls, the grades that
came back) is an error record that keeps the fields the exception carries.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from orchestra_ops.client.call_errors import CallError
from orchestra_ops.core.fsutil import is_disk_full
from orchestra_ops.errors import DiskFull, FleetUnavailable, OpsError
from orchestra_ops.runner.dataset import Sample
from orchestra_ops.runner.progress import Progress
from orchestra_ops.runner.suite import UnitFailed

log = logging.getLogger(__name__)

Work = Callable[[Sample], Awaitable[dict[str, Any]]]
Record = dict[str, Any]


@dataclass
class Controller:
    """Stop/abort state shared by the signal handlers and the loop."""

    stopping: bool = False
    aborted: bool = False
    timed_out: bool = False
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    on_stop: Callable[[str], None] | None = None
    failure: OpsError | None = None  # a fault that stopped the run (a full disk); raised when the loop ends
    halted: OpsError | None = None  # a limit that stopped the run (--max-cost); raised when the loop ends

    def time_out(self) -> None:
        """The run's wall-clock limit: start nothing more and abandon what is in flight (resume reruns it)."""
        self.timed_out = True
        if self.on_stop:
            self.on_stop("time limit reached")
        while not self.aborted:
            self.interrupt()

    def interrupt(self, source: str = "") -> None:
        """Ctrl-C (`source` empty), SIGTERM or SIGHUP: the first stops new tasks, the second aborts."""
        said = f"{source}: " if source else ""
        if not self.stopping:
            self.stopping = True
            if self.on_stop:
                self.on_stop(f"{said}stopping: no new tasks; waiting for {len(self.tasks)} in flight to finish or "
                             "time out (Ctrl-C again to abort them)")
            return
        if not self.aborted:
            self.aborted = True
            if self.on_stop:
                self.on_stop(f"{said}aborting {len(self.tasks)} task(s) in flight (they stay missing; --resume "
                             "reruns them)")
            self._cancel()

    def fail(self, error: OpsError) -> None:
        """A fault no task can get past (nothing can be written): no new task, those in flight cancelled."""
        if self.failure is None:
            self.failure = error
        self.stopping = True
        if not self.aborted:
            self.aborted = True
            self._cancel()

    def halt(self, error: OpsError, why: str) -> None:
        """A limit the run reached (`why`): no new task; those in flight finish and are kept; `error` ends the run."""
        if self.halted is not None or self.failure is not None:
            return
        self.halted = error
        self.stopping = True
        if self.on_stop:
            self.on_stop(f"{why}: stopping: no new tasks; waiting for {len(self.tasks)} in flight to finish")

    def end_state(self) -> str:
        """What live.json and the end event say: `finished`, `stopped` (a stop, a limit, a fleet that
        vanished: resumable as it is) or `crashed` (a fault such as a full disk)."""
        if self.failure is not None:
            return "stopped" if isinstance(self.failure, FleetUnavailable) else "crashed"
        return "stopped" if self.stopping else "finished"

    def end_reason(self) -> str | None:
        """The first line of what ended the run early (a fault or a limit), else None."""
        error = self.failure or self.halted
        return str(error).splitlines()[0] if error is not None else None

    def _cancel(self) -> None:
        current = asyncio.current_task() if _in_loop() else None
        for task in list(self.tasks):
            if task is not current:  # a task reporting its own result finishes; its record is already dropped
                task.cancel()


def _in_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def run_tasks(samples: Iterable[Sample], work: Work, *, concurrency: int, task_timeout_s: float,
                    on_done: Callable[[Record, float], None], progress: Progress,
                    controller: Controller | None = None) -> None:
    control = controller or Controller()
    slots = asyncio.Semaphore(concurrency)

    async def run_one(sample: Sample) -> None:
        start = time.monotonic()
        try:
            fields = await asyncio.wait_for(work(sample), task_timeout_s)
            record: Record = {"id": sample["id"], "status": "ok",
                              **{k: v for k, v in fields.items() if k not in ("id", "status")}}
        except UnitFailed as exc:  # an error that keeps the work the unit did
            record = _error(sample, exc.kind, exc.message)
            record.update({k: v for k, v in exc.fields.items() if k not in record})
        except CallError as exc:
            record = _error(sample, exc.kind, exc.message)
        except asyncio.TimeoutError:
            record = _error(sample, "task_timeout", f"the task did not finish within {task_timeout_s:g} s")
        except asyncio.CancelledError:
            raise
        except OSError as exc:
            if is_disk_full(exc):  # the unit's own files (a trajectory) did not fit: missing, not failed
                control.fail(exc if isinstance(exc, DiskFull) else DiskFull(exc.filename or "the run dir", exc))
                return
            log.debug("task %r raised", sample.get("id"), exc_info=True)
            record = _error(sample, "exception", f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # a bug in a suite must cost one task, not a 50,000-task run
            log.debug("task %r raised", sample.get("id"), exc_info=True)
            record = _error(sample, "exception", f"{type(exc).__name__}: {exc}")
        if control.failure is not None:
            return  # nothing more is recorded (a full disk, a fleet that vanished): the unit stays missing
        elapsed = time.monotonic() - start
        record["elapsed"] = round(elapsed, 3)
        if record["status"] == "ok":
            progress.ok += 1
        else:
            progress.failed += 1
        on_done(record, elapsed)

    def finished(task: asyncio.Task[None]) -> None:
        control.tasks.discard(task)
        progress.in_flight -= 1
        slots.release()
        if not task.cancelled() and task.exception() is not None:
            log.error("task crashed: %r", task.exception())

    for sample in samples:
        await slots.acquire()
        if control.stopping:
            slots.release()
            break
        progress.in_flight += 1
        task = asyncio.get_running_loop().create_task(run_one(sample))
        control.tasks.add(task)
        task.add_done_callback(finished)
    while control.tasks:
        await asyncio.wait(set(control.tasks))


def _error(sample: Sample, kind: str, message: str) -> Record:
    return {"id": sample["id"], "status": "error", "error_type": kind, "error": message}
