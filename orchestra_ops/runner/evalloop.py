"""The loop of one `ops eval`: the asyncio main over the parts `build_run` (evalrun.py) wired.

`run_loop(built)` installs the stop signals (SIGINT, SIGTERM, SIGHUP), starts the ticker (progress
line, flushes, live.json, stall watchdog), arms the wall-clock limit, runs every unit through the
engine (engine.py) and records each result as it finishes; it closes the fleet's clients on the
way out. What it leaves behind is read from `built.controller` (stopped, timed out, failed).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import signal
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from orchestra_ops.client.cache import ResponseCache
from orchestra_ops.client.callctx import current_task
from orchestra_ops.client.fleet_client import FleetClient
from orchestra_ops.core.procs import loop_signal_handlers
from orchestra_ops.errors import DiskFull
from orchestra_ops.runner.dataset import Sample, sample_id
from orchestra_ops.runner.engine import Controller, Record, Work, run_tasks
from orchestra_ops.runner.monitor import RunMonitor
from orchestra_ops.runner.options import PreparedRun
from orchestra_ops.runner.profile import Event, ProfileWriter
from orchestra_ops.runner.progress import Progress
from orchestra_ops.runner.replica_counters import read_counters
from orchestra_ops.runner.run_events import EventLog
from orchestra_ops.runner.spend import SpendMeter
from orchestra_ops.runner.task_context import RunContext
from orchestra_ops.runner.tee import TeeLog
from orchestra_ops.runner.toolbox import Toolbox


@dataclass
class BuiltRun:
    """A prepared run and the parts wired around it: what the loop drives and `close_run` closes."""

    run: PreparedRun
    tee: TeeLog
    progress: Progress
    fleet: FleetClient
    cache: ResponseCache | None
    profile: ProfileWriter
    controller: Controller
    events: EventLog
    monitor: RunMonitor
    toolbox: Toolbox
    spend: SpendMeter

    def end_state(self) -> str:
        """How the loop ended (the controller's word: finished, stopped or crashed), except that a time limit
        reached once every unit had its result is a finished run."""
        store, samples = self.run.store, self.run.samples
        late_limit = self.controller.timed_out and len(store.finished_ids) == len(samples)  # nothing missing
        if late_limit and self.controller.failure is None and self.controller.halted is None:
            return "finished"
        return self.controller.end_state()


async def run_loop(built: BuiltRun) -> None:
    """Every unit to run, `concurrency` at a time; returns when all finished or the controller stopped them."""
    run, controller = built.run, built.controller
    loop = asyncio.get_running_loop()
    with _signals(loop, controller):
        ticker = loop.create_task(_tick(built))
        if run.options.wall_timeout_s is not None:
            loop.call_later(run.options.wall_timeout_s, controller.time_out)
        try:
            await built.fleet.discover_limits(run.names)
            for reading in await read_counters(built.fleet, run.names, "start"):  # affinity is seen, not assumed
                keep_event(built.profile, controller, reading)
            await run_tasks(run.todo, _worker(built), concurrency=run.options.concurrency,
                            task_timeout_s=run.task_timeout_s, on_done=_recorder(built), progress=built.progress,
                            controller=controller)
        finally:
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker
            try:
                for reading in await read_counters(built.fleet, run.names, "end"):
                    keep_event(built.profile, controller, reading)
            finally:
                await built.fleet.close()


def _recorder(built: BuiltRun) -> Callable[[Record, float], None]:
    """on_done: keep the record (results.jsonl), count it, and show its `[TASK_COMPLETE]` line."""
    run, controller = built.run, built.controller

    def done(record: Record, elapsed: float) -> None:
        if controller.failure is not None:
            return  # nothing can be written: the unit stays missing and --resume runs it
        try:
            run.store.append(record)
        except DiskFull as exc:
            controller.fail(exc)
            return
        built.progress.note_task(elapsed)
        built.monitor.task_finished(elapsed)
        built.tee.event(completion_line(record, elapsed, run.suite.summary_fields))

    return done


def _worker(built: BuiltRun) -> Work:
    """The work of one unit: the suite's `run` in the unit's own context (what a stall report names)."""
    run, monitor = built.run, built.monitor
    previous = run.store.final_records() if run.options.retry_failed else {}

    def context(sample: Sample) -> RunContext:
        return RunContext(built.fleet, sample["id"], built.profile, previous.get(sample_id(sample)), built.toolbox)

    async def work(sample: Sample) -> dict[str, Any]:
        current_task.set(sample["id"])  # this task's own context: what a stall report names
        monitor.inflight.task_started(sample["id"])
        ctx = context(sample)
        try:
            return await run.suite.run(sample, ctx)
        finally:
            ctx.end()  # the unit's sessions end with it: the pools' session tables stay bounded
            monitor.inflight.task_finished(sample["id"])

    return work


def keep_event(profile: ProfileWriter, controller: Controller, event: Event) -> None:
    """One more profile event (a session move, a replica's counters); a full disk stops the run."""
    try:
        profile(event)
    except DiskFull as exc:
        controller.fail(exc)


async def _tick(built: BuiltRun) -> None:
    """Every interval: the progress line, results/profile flushed even when tasks are slow, live.json
    and the stall watchdog."""
    while True:
        await asyncio.sleep(built.run.options.progress_interval_s)
        try:
            built.run.store.flush()
            built.profile.flush()
        except DiskFull as exc:
            built.controller.fail(exc)
            return
        built.tee.event(built.progress.line())
        for line in built.monitor.tick():
            built.tee.alert(line)


# signal -> what the stop line says it was (Ctrl-C says nothing: the user knows what they pressed)
STOP_SIGNALS = {signal.SIGINT: "", signal.SIGTERM: "SIGTERM",
                signal.SIGHUP: "SIGHUP (the terminal or ssh session closed)"}


@contextlib.contextmanager
def _signals(loop: asyncio.AbstractEventLoop, controller: Controller) -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP: the first stops new tasks (those in flight finish and are kept),
    the second aborts those in flight. SIGHUP no longer kills the run and loses its last batch."""
    handlers = {sig: functools.partial(controller.interrupt, source) for sig, source in STOP_SIGNALS.items()}
    with loop_signal_handlers(loop, handlers):
        yield


def completion_line(record: Record, elapsed: float, fields: Sequence[str] = ()) -> str:
    """`[TASK_COMPLETE] id=… status=ok|error elapsed=…s [error=KIND] [FIELD=VALUE…]`, one per finished unit."""
    line = f"[TASK_COMPLETE] id={record['id']} status={record['status']} elapsed={elapsed:.2f}s"
    if record["status"] != "ok":
        line += f" error={record.get('error_type')}"
    for name in fields:
        if name in record:
            line += f" {name}={record[name]}"
    return line
