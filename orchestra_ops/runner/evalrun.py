"""One `ops eval`: run what `prepare` (runner/prepare.py) chose, keep every result, score the run.

The open-file limit and provider keys are checked, every model called is probed for a live replica
(preflight.py), and run.json written, before the first request. The run dir's lock (lock.py) is
taken by `prepare` and held by the caller until the run, its scores and its analysis are done.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestra_ops.client.cache import ResponseCache, cache_counts, cache_entry
from orchestra_ops.client.callctx import current_task
from orchestra_ops.client.chat import CallEvent
from orchestra_ops.client.fleet_client import FleetClient
from orchestra_ops.client.retry import RetryPolicy
from orchestra_ops.client.transport import KeepAliveTransport
from orchestra_ops.core.fsutil import atomic_write_text, is_disk_full
from orchestra_ops.core.headline import HEADLINE_KEY
from orchestra_ops.errors import DiskFull, Interrupted, RunTimeout
from orchestra_ops.runner.banner import RunFacts, banner, result_line, routing_lines
from orchestra_ops.runner.dataset import Sample, sample_id
from orchestra_ops.runner.engine import Controller, Record, run_tasks
from orchestra_ops.runner.inflight import InFlight, TrackingTransport
from orchestra_ops.runner.limits import check_concurrency, raise_open_file_limit
from orchestra_ops.runner.manifest import run_manifest
from orchestra_ops.runner.monitor import RunMonitor
from orchestra_ops.runner.preflight import check_live
from orchestra_ops.runner.prepare import PreparedRun
from orchestra_ops.runner.profile import ProfileWriter
from orchestra_ops.runner.progress import Progress, format_duration
from orchestra_ops.runner.run_events import EventLog
from orchestra_ops.runner.rundir import RUN_FILE, SCORES_FILE, read_run_info, write_run_info
from orchestra_ops.runner.suite import Alert
from orchestra_ops.runner.task_context import RunContext
from orchestra_ops.runner.tee import LOG_FILE, TeeLog
from orchestra_ops.runner.toolbox import Toolbox


@dataclass
class EvalSummary:
    run_dir: Path
    dataset_size: int
    ran: int
    ok: int
    failed: int
    store_ok: int
    store_failed: int
    elapsed_s: float
    scores: dict[str, Any] | None = None
    calls: int = 0  # model calls this invocation made (cache hits included)
    tokens: int = 0  # their prompt and completion tokens

    def result_line(self, suite: str) -> str:
        """The one line that ends a run: each model's score ± its interval, n, wall time, calls, tokens, cost."""
        return result_line(suite, self.scores, ok=self.store_ok, failed=self.store_failed, total=self.dataset_size,
                           wall_s=self.elapsed_s, calls=self.calls, tokens=self.tokens, run_dir=self.run_dir)


def run_eval(run: PreparedRun, tee: TeeLog, progress: Progress | None = None) -> EvalSummary:
    """Run the prepared tasks; raise Interrupted (exit 130) after a clean stop on Ctrl-C, SIGTERM or
    SIGHUP, DiskFull (exit 4) after a clean stop on a full disk, LaunchError (exit 3) when a model the
    run calls has no live replica (nothing is run).

    `progress`: the counters to update (a live display may be reading them); default: a new one.
    """
    options = run.options
    if run.lock is not None and run.lock.takeover:
        tee.line(f"note: {run.lock.takeover}")
    if run.store.skipped_lines:
        tee.line(f"note: {run.store.path}: {run.store.skipped_lines} unreadable line(s) skipped (a torn or cut "
                 "record); their ids count as not done and run again")
    cache = ResponseCache(options.cache, sampled=options.cache_sampled) if options.cache else None
    inflight = InFlight()
    fleet = FleetClient(run.routing, retry=RetryPolicy(attempts=options.attempts),
                  request_timeout_s=options.request_timeout_s, unavailable_wait_s=options.unavailable_wait_s,
                  cache=cache, transport=TrackingTransport(KeepAliveTransport(), inflight))
    for name, cap in run.suite.limits(run.suite_options).items():
        fleet.limit(name, cap)
    soft, hard = raise_open_file_limit()
    check_concurrency(options.concurrency, fleet.replica_count(run.names), soft, hard)
    if run.todo:
        check_live(run.routing, run.names)
    with _disk_full_as_error(run.run_dir / RUN_FILE):
        write_run_info(run.run_dir, {"suite": run.suite.name, "dataset": str(run.dataset),
                                     "source": run.routing.source, "topology": run.routing.name,
                                     "model": run.models[0] if run.models else None,
                                     "models": list(run.models), "limit": options.limit, "dedupe": options.dedupe,
                                     "suite_options": run.suite_options, "exec_unsafe": options.exec_unsafe,
                                     "templates": {n: t.to_json() for n, t in run.templates.items()},
                                     **cache_entry(cache, read_run_info(run.run_dir)),
                                     **run_manifest(run, read_run_info(run.run_dir))})
    profile = ProfileWriter(run.run_dir)
    progress = progress or Progress(total=len(run.todo))
    controller = Controller(on_stop=tee.line)
    tee.on_disk_full = controller.fail
    events = EventLog(run.run_dir, options.notify)

    def on_eject(pool: str, replica: str, reason: str) -> None:
        events.emit("replica_ejected", model=pool, replica=replica, reason=reason)

    fleet.on_eject = on_eject
    monitor = RunMonitor(run.run_dir, progress, inflight, events, lambda: _counts(run),
                         stall_after_s=options.stall_after_s)
    monitor.write("running")

    def on_call(event: CallEvent) -> None:
        try:
            profile(event)
        except DiskFull as exc:
            controller.fail(exc)
        progress.note_call(event.latency_s, (event.prompt_tokens or 0) + (event.completion_tokens or 0))

    fleet.on_call = on_call  # before any client exists: every client reports its calls
    mode = "resume" if options.resume else "retry-failed" if options.retry_failed else "new run"
    facts = RunFacts(run.suite.name, run.routing.name, run.run_dir, len(run.samples), len(run.todo),
                     len(run.store.ok_ids), len(run.store.failed_ids), mode)
    for line in banner(facts, run.routing, run.names, verbose=tee.verbose):
        tee.line(line)
    for line in routing_lines(run.routing, run.names):
        tee.detail(line)
    toolbox = Toolbox(fleet, exec_workers=options.exec_workers)
    for line in run.suite.routing_notes(toolbox):
        (tee.alert if isinstance(line, Alert) else tee.detail)(f"  {line}")
    tee.detail(f"run dir {run.run_dir} ({mode}): {len(run.samples)} samples, {len(run.todo)} to run, "
               f"{len(run.store.ok_ids)} ok and {len(run.store.failed_ids)} failed before; concurrency "
               f"{options.concurrency}, task deadline {run.task_timeout_s:g} s, open-file limit {soft}")
    progress.started_at = time.monotonic()
    if cache is not None:
        tee.detail(f"response cache {cache.path} ({'every request' if cache.sampled else 'temperature 0 only'})")
    start = time.monotonic()
    end_state = "crashed"
    try:
        asyncio.run(_main(run, fleet, tee, progress, controller, profile, toolbox, monitor))
        end_state = ("crashed" if controller.failure is not None else "stopped" if controller.stopping
                     else "finished")
    finally:
        for close in (run.store.close, profile.close):
            try:
                close()
            except DiskFull as exc:
                controller.fail(exc)
        if cache is not None:
            cache.close()
        monitor.finish(end_state)
        if not options.supervised:  # under `--detach` the supervisor sends the end of the run
            events.emit(end_state, **dict(zip(("done", "failed", "total"), _counts(run), strict=True)))
        events.close()
    elapsed = time.monotonic() - start
    tee.event(progress.line())
    summary = EvalSummary(run.run_dir, len(run.samples), progress.finished, progress.ok, progress.failed,
                          len(run.store.ok_ids), len(run.store.failed_ids), elapsed, calls=progress.calls,
                          tokens=progress.tokens)
    if controller.failure is not None:
        raise controller.failure
    if controller.timed_out:
        missing = len(run.samples) - len(run.store.finished_ids)
        raise RunTimeout(f"the time limit was reached after {progress.finished} task(s); {missing} unit(s) have "
                         f"no result; rerun the same command to resume (run dir {run.run_dir})")
    if controller.stopping:
        missing = len(run.samples) - len(run.store.finished_ids)
        raise Interrupted(f"interrupted after {progress.finished} task(s) in {format_duration(elapsed)}; "
                          f"{missing} sample(s) have no result; continue with --resume (run dir {run.run_dir})")
    tee.detail(f"finished {progress.finished} task(s) in {format_duration(elapsed)}: {progress.ok} ok, "
               f"{progress.failed} failed; run dir {run.run_dir} now has {summary.store_ok} ok, "
               f"{summary.store_failed} failed of {len(run.samples)}")
    with _disk_full_as_error(run.run_dir / SCORES_FILE):
        summary.scores = write_scores(run)
    if summary.scores is not None:
        for line in run.suite.score_lines(summary.scores):
            tee.detail(line)
        if summary.scores.get("cache"):
            counts = summary.scores["cache"]
            tee.detail(f"response cache: {counts['hits']} of {counts['calls']} call(s) answered from the cache, "
                       f"{counts['model_calls']} by a model")
        tee.detail(f"scores written to {run.run_dir / SCORES_FILE}")
    if tee.disk_full is not None:
        raise tee.disk_full
    return summary


@contextlib.contextmanager
def _disk_full_as_error(path: Path) -> Iterator[None]:
    """ENOSPC/EDQUOT writing `path` becomes DiskFull (exit 4, one message), not a traceback."""
    try:
        yield
    except OSError as exc:
        if is_disk_full(exc) and not isinstance(exc, DiskFull):
            raise DiskFull(path, exc) from None
        raise


def write_scores(run: PreparedRun) -> dict[str, Any] | None:
    """scores.json from the final record of every unit of the dataset (earlier invocations included)."""
    final = run.store.final_records()
    records = {sample_id(s): final[sample_id(s)] for s in run.samples if sample_id(s) in final}
    scores = run.suite.score(records, run.samples)
    if scores is not None:
        headline = run.suite.headline(scores, records, run.samples)
        if headline is not None:
            scores[HEADLINE_KEY] = headline.to_json()
        if (read_run_info(run.run_dir) or {}).get("cache_used"):
            scores["cache"] = cache_counts(run.run_dir)
        atomic_write_text(run.run_dir / SCORES_FILE, json.dumps(scores, indent=2, default=str) + "\n")
    return scores


def _counts(run: PreparedRun) -> tuple[int, int, int]:
    """(ok, failed, total) over the whole run dir, earlier invocations included."""
    ok = sum(1 for status in run.store.final.values() if status == "ok")
    return ok, len(run.store.final) - ok, len(run.samples)


async def _main(run: PreparedRun, fleet: FleetClient, tee: TeeLog, progress: Progress, controller: Controller,
                profile: ProfileWriter, toolbox: Toolbox, monitor: RunMonitor) -> None:
    loop = asyncio.get_running_loop()
    with _signals(loop, controller):
        ticker = loop.create_task(_tick(run, progress, tee, profile, controller, monitor))
        if run.options.wall_timeout_s is not None:
            loop.call_later(run.options.wall_timeout_s, controller.time_out)
        try:
            await fleet.discover_limits(run.names)
            def done(record: Record, elapsed: float) -> None:
                if controller.failure is not None:
                    return  # nothing can be written: the unit stays missing and --resume runs it
                try:
                    run.store.append(record)
                except DiskFull as exc:
                    controller.fail(exc)
                    return
                progress.note_task(elapsed)
                monitor.task_finished(elapsed)
                tee.event(completion_line(record, elapsed, run.suite.summary_fields))

            previous = run.store.final_records() if run.options.retry_failed else {}

            def context(sample: Sample) -> RunContext:
                return RunContext(fleet, sample["id"], profile, previous.get(sample_id(sample)), toolbox)

            async def work(sample: Sample) -> dict[str, Any]:
                current_task.set(sample["id"])  # this task's own context: what a stall report names
                monitor.inflight.task_started(sample["id"])
                try:
                    return await run.suite.run(sample, context(sample))
                finally:
                    monitor.inflight.task_finished(sample["id"])

            await run_tasks(run.todo, work,
                            concurrency=run.options.concurrency, task_timeout_s=run.task_timeout_s,
                            on_done=done, progress=progress, controller=controller)
        finally:
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker
            await fleet.close()


async def _tick(run: PreparedRun, progress: Progress, tee: TeeLog, profile: ProfileWriter,
                controller: Controller, monitor: RunMonitor) -> None:
    """Every interval: the progress line, results/profile flushed even when tasks are slow, live.json
    and the stall watchdog."""
    while True:
        await asyncio.sleep(run.options.progress_interval_s)
        try:
            run.store.flush()
            profile.flush()
        except DiskFull as exc:
            controller.fail(exc)
            return
        tee.event(progress.line())
        for line in monitor.tick():
            tee.alert(line)


# signal -> what the stop line says it was (Ctrl-C says nothing: the user knows what they pressed)
STOP_SIGNALS = {signal.SIGINT: "", signal.SIGTERM: "SIGTERM",
                signal.SIGHUP: "SIGHUP (the terminal or ssh session closed)"}


@contextlib.contextmanager
def _signals(loop: asyncio.AbstractEventLoop, controller: Controller) -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP: the first stops new tasks (those in flight finish and are kept),
    the second aborts those in flight. SIGHUP no longer kills the run and loses its last batch."""
    installed = []
    for sig, source in STOP_SIGNALS.items():
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, controller.interrupt, source)
            installed.append(sig)
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


def open_tee(run_dir: Path, console: Callable[[str], None] | None,
             alert_console: Callable[[str], None] | None = None) -> TeeLog:
    return TeeLog(run_dir / LOG_FILE, console, alert_console)


def completion_line(record: Record, elapsed: float, fields: Sequence[str] = ()) -> str:
    """`[TASK_COMPLETE] id=… status=ok|error elapsed=…s [error=KIND] [FIELD=VALUE…]`, one per finished unit."""
    line = f"[TASK_COMPLETE] id={record['id']} status={record['status']} elapsed={elapsed:.2f}s"
    if record["status"] != "ok":
        line += f" error={record.get('error_type')}"
    for name in fields:
        if name in record:
            line += f" {name}={record[name]}"
    return line
