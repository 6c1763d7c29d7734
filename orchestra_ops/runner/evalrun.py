"""One `ops eval`: run what `prepare` (runner/prepare.py) chose, keep every result, score the run.

    run_eval = build_run   clients, response cache, open-file limit, preflight, run.json (the manifest),
                           profile, events, live monitor, the routing table and the start lines
             + run_loop    the asyncio main (evalloop.py): every unit, signals, ticker, time limit
             + close_run   results, profile, cache and events closed; live.json and the end event
             + finish_run  the end line, Interrupted / RunTimeout / DiskFull, else scores.json and its lines

The open-file limit and provider keys are checked, every model called is probed for a live replica
(preflight.py), and run.json written, before the first request. The run dir's lock (lock.py) is
taken by `prepare` and held by the caller until the run, its scores and its analysis are done
(orchestra_ops/api/session.py: the one eval session every way in goes through).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestra_ops.client.cache import ResponseCache, cache_counts, cache_entry
from orchestra_ops.client.chat import CallEvent
from orchestra_ops.client.fleet_client import FleetClient
from orchestra_ops.client.identity import resolve_identities
from orchestra_ops.client.retry import RetryPolicy
from orchestra_ops.client.transport import KeepAliveTransport
from orchestra_ops.core.fsutil import atomic_write_text, is_disk_full
from orchestra_ops.core.headline import HEADLINE_KEY
from orchestra_ops.errors import DiskFull, Interrupted, RunTimeout
from orchestra_ops.runner.banner import routing_lines
from orchestra_ops.runner.dataset import sample_id
from orchestra_ops.runner.engine import Controller
from orchestra_ops.runner.evalloop import BuiltRun, keep_event, run_loop
from orchestra_ops.runner.fleetwatch import FleetWatch, fleet_down_recorded
from orchestra_ops.runner.inflight import InFlight, TrackingTransport
from orchestra_ops.runner.limits import check_concurrency, raise_open_file_limit
from orchestra_ops.runner.manifest import run_manifest
from orchestra_ops.runner.monitor import RunMonitor
from orchestra_ops.runner.options import PreparedRun
from orchestra_ops.runner.preflight import check_live
from orchestra_ops.runner.profile import ProfileWriter
from orchestra_ops.runner.profile_reader import read_profile
from orchestra_ops.runner.progress import Progress, format_duration
from orchestra_ops.runner.replica_counters import MoveEvent
from orchestra_ops.runner.run_events import EventLog
from orchestra_ops.runner.rundir import RUN_FILE, SCORES_FILE, read_run_info, write_run_info
from orchestra_ops.runner.spend import SpendMeter
from orchestra_ops.runner.suite import Alert
from orchestra_ops.runner.tee import TeeLog
from orchestra_ops.runner.toolbox import Toolbox
from orchestra_ops.runner.usage import usage, usage_lines

__all__ = ["SCORES_FILE", "EvalSummary", "run_eval"]


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
    scoring_s: float | None = None  # writing scores.json (and the suite's own outputs) took this long
    calls: int = 0  # model calls this invocation made (cache hits included)
    tokens: int = 0  # their prompt and completion tokens


def run_eval(run: PreparedRun, tee: TeeLog, progress: Progress | None = None) -> EvalSummary:
    """Run the prepared tasks; raise Interrupted (exit 130) after a clean stop on Ctrl-C, SIGTERM or
    SIGHUP, DiskFull (exit 4) after a clean stop on a full disk, FleetUnavailable (exit 3) when a model the
    run calls has no live replica (at the start: nothing is run; mid-run: runner/fleetwatch.py), SpendLimit
    (exit 5) when the run dir's spend passes --max-cost (runner/spend.py).

    `progress`: the counters to update (a live display may be reading them); default: a new one.
    """
    built = build_run(run, tee, progress or Progress(total=len(run.todo)))
    start = time.monotonic()
    end_state = "crashed"
    try:
        asyncio.run(run_loop(built))
        end_state = built.end_state()
    finally:
        close_run(built, end_state)
    return finish_run(built, time.monotonic() - start)


def build_run(run: PreparedRun, tee: TeeLog, progress: Progress) -> BuiltRun:
    """Everything before the first request: notes, clients and cache, limits, preflight, run.json, profile,
    events, the live monitor, the routing table and the start lines. What it opened is closed if it fails."""
    options = run.options
    if run.lock is not None and run.lock.takeover:
        tee.line(f"note: {run.lock.takeover}")
    if run.store.skipped_lines:
        tee.line(f"note: {run.store.path}: {run.store.skipped_lines} unreadable line(s) skipped (a torn or cut "
                 "record); their ids count as not done and run again")
    cache = ResponseCache(options.cache, sampled=options.cache_sampled) if options.cache else None
    opened: list[Callable[[], Any]] = [cache.close] if cache is not None else []
    try:
        identities = resolve_identities(run.routing, run.names) if cache is not None else {}
        inflight = InFlight()
        fleet = FleetClient(run.routing, retry=RetryPolicy(attempts=options.attempts),
                      request_timeout_s=options.request_timeout_s, unavailable_wait_s=options.unavailable_wait_s,
                      cache=cache, identities=identities, transport=TrackingTransport(KeepAliveTransport(), inflight))
        for name, cap in run.suite.limits(run.suite_options).items():
            fleet.limit(name, cap)
        soft, hard = raise_open_file_limit()
        check_concurrency(options.concurrency, fleet.replica_count(run.names), soft, hard)
        spend = SpendMeter.start(run.run_dir, options.max_cost, continuing=options.resume or options.retry_failed,
                                 targets=fleet.check(run.names))  # a spent run dir: exit 5 before anything is probed
        if run.todo:
            with fleet_down_recorded(run.run_dir):
                check_live(run.routing, run.names)
        _write_manifest(run, cache, identities)
        profile = ProfileWriter(run.run_dir)
        opened.append(profile.close)
        controller = Controller(on_stop=tee.line)
        tee.on_disk_full = controller.fail
        events = EventLog(run.run_dir, options.notify)
        opened.append(events.close)
        _wire_fleet(fleet, events, profile, controller, progress, FleetWatch(run.run_dir, controller, events), spend)
        monitor = RunMonitor(run.run_dir, progress, inflight, events, lambda: _counts(run),
                             stall_after_s=options.stall_after_s, supervised=options.supervised)
        monitor.write("running")
        built = BuiltRun(run, tee, progress, fleet, cache, profile, controller, events, monitor,
                         Toolbox(fleet, exec_workers=options.exec_workers), spend)
        _start_lines(built, soft)
    except BaseException:
        for close in reversed(opened):
            with contextlib.suppress(Exception):
                close()
        raise
    return built


def _write_manifest(run: PreparedRun, cache: ResponseCache | None, identities: dict[str, Any]) -> None:
    """run.json: what this run is (read back on --resume) and the manifest of this invocation."""
    options = run.options
    with _disk_full_as_error(run.run_dir / RUN_FILE):
        write_run_info(run.run_dir, {"suite": run.suite.name, "dataset": str(run.dataset),
                                     "source": run.routing.source, "topology": run.routing.name,
                                     "model": run.models[0] if run.models else None,
                                     "models": list(run.models), "limit": options.limit, "dedupe": options.dedupe,
                                     "suite_options": run.suite_options, "exec_unsafe": options.exec_unsafe,
                                     "templates": {n: t.to_json() for n, t in run.templates.items()},
                                     **cache_entry(cache, read_run_info(run.run_dir), identities),
                                     **run_manifest(run, read_run_info(run.run_dir))})


def _wire_fleet(fleet: FleetClient, events: EventLog, profile: ProfileWriter, controller: Controller,
                progress: Progress, fleet_watch: FleetWatch, spend: SpendMeter) -> None:
    """Every ejected replica becomes an event; every model call a profile line, a latency sample, a check that
    its model is still served (fleetwatch.py) and its cost against --max-cost (spend.py)."""
    def on_eject(pool: str, replica: str, reason: str) -> None:
        events.emit("replica_ejected", model=pool, replica=replica, reason=reason)

    def on_call(event: CallEvent) -> None:
        try:
            profile(event)
        except DiskFull as exc:
            controller.fail(exc)
        progress.note_call(event.latency_s, (event.prompt_tokens or 0) + (event.completion_tokens or 0))
        fleet_watch.note(event)
        spend.note(event, controller)

    fleet.on_eject = on_eject
    fleet.on_move = lambda pool, move: keep_event(profile, controller, MoveEvent(pool, move, time.time()))
    fleet.on_call = on_call  # before any client exists: every client reports its calls


def _start_lines(built: BuiltRun, open_file_limit: int) -> None:
    """The routing table, the suite's notes under it (an alert on the console, the rest with -v: TeeLog.detail),
    and what this invocation will do; the banner above them is the session's (runner/banner.py)."""
    run, tee, options = built.run, built.tee, built.run.options
    for line in routing_lines(run.routing, run.names):
        tee.detail(line)
    for line in run.suite.routing_notes(built.toolbox):
        (tee.alert if isinstance(line, Alert) else tee.detail)(f"  {line}")
    mode = "resume" if options.resume else "retry-failed" if options.retry_failed else "new run"
    tee.detail(f"run dir {run.run_dir} ({mode}): {len(run.samples)} samples, {len(run.todo)} to run, "
               f"{len(run.store.ok_ids)} ok and {len(run.store.failed_ids)} failed before; concurrency "
               f"{options.concurrency}, task deadline {run.task_timeout_s:g} s, open-file limit {open_file_limit}")
    built.progress.started_at = time.monotonic()
    if built.cache is not None:
        which = "every request" if built.cache.sampled else "temperature 0 only"
        tee.detail(f"response cache {built.cache.path} ({which})")
    if built.spend.limit is not None:
        tee.detail(built.spend.describe())


def close_run(built: BuiltRun, end_state: str) -> None:
    """After the loop, whatever ended it: results and profile flushed and closed (a full disk stops the run
    as a failure), the cache closed, live.json's end state, the end event (unless supervised), notify waited for."""
    run = built.run
    for close in (run.store.close, built.profile.close):
        try:
            close()
        except DiskFull as exc:
            built.controller.fail(exc)
    if built.cache is not None:
        built.cache.close()
    reason = built.controller.end_reason()
    built.monitor.finish(end_state, reason)
    if not run.options.supervised:  # under `--detach` the supervisor sends the end of the run
        built.events.emit(end_state, **dict(zip(("done", "failed", "total"), _counts(run), strict=True)),
                          **({"reason": reason} if reason else {}))
    built.events.close()


def finish_run(built: BuiltRun, elapsed: float) -> EvalSummary:
    """The end line (a progress event); a stop (fault, time limit, signal) raised as its error; else scores.json
    and its lines (in eval.log, on the console with -v; the session prints the one result line)."""
    run, tee, progress, controller = built.run, built.tee, built.progress, built.controller
    tee.event(progress.line())
    summary = EvalSummary(run.run_dir, len(run.samples), progress.finished, progress.ok, progress.failed,
                          len(run.store.ok_ids), len(run.store.failed_ids), elapsed, calls=progress.calls,
                          tokens=progress.tokens)
    if controller.failure is not None:
        raise controller.failure
    if controller.halted is not None:
        raise controller.halted
    missing = len(run.samples) - len(run.store.finished_ids)  # a limit reached after the last unit still scores
    if controller.timed_out and missing:
        raise RunTimeout(f"the time limit was reached after {progress.finished} task(s); {missing} unit(s) have "
                         f"no result; rerun the same command to resume (run dir {run.run_dir})")
    if controller.stopping and not (controller.timed_out and not missing):
        raise Interrupted(f"interrupted after {progress.finished} task(s) in {format_duration(elapsed)}; "
                          f"{missing} sample(s) have no result; continue with --resume (run dir {run.run_dir})")
    tee.detail(f"finished {progress.finished} task(s) in {format_duration(elapsed)}: {progress.ok} ok, "
               f"{progress.failed} failed; run dir {run.run_dir} now has {summary.store_ok} ok, "
               f"{summary.store_failed} failed of {len(run.samples)}")
    scoring = time.monotonic()
    with _disk_full_as_error(run.run_dir / SCORES_FILE):
        summary.scores = write_scores(run)
    summary.scoring_s = time.monotonic() - scoring
    if summary.scores is not None:
        for line in run.suite.score_lines(summary.scores):
            tee.detail(line)
        if summary.scores.get("cache"):
            counts = summary.scores["cache"]
            tee.detail(f"response cache: {counts['hits']} of {counts['calls']} call(s) answered from the cache, "
                       f"{counts['model_calls']} by a model")
        for line in usage_lines(summary.scores.get("usage") or {}):
            tee.detail(line)
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
        scores["usage"] = usage(read_profile(run.run_dir))  # tokens and cost per role, every attempt
        atomic_write_text(run.run_dir / SCORES_FILE, json.dumps(scores, indent=2, default=str) + "\n")
    return scores


def _counts(run: PreparedRun) -> tuple[int, int, int]:
    """(ok, failed, total) over the whole run dir, earlier invocations included."""
    ok = sum(1 for status in run.store.final.values() if status == "ok")
    return ok, len(run.store.final) - ok, len(run.samples)
