"""One `ops eval`: resolve routing and suite, pick the tasks, run them, keep every result.

Everything up to the first request is checked first (routing, provider keys, dataset ids, the run
dir, the open-file limit), so a bad run fails in a second with exit 2, not an hour in.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestra_ops.client.chat import CallEvent
from orchestra_ops.client.fleet import Fleet
from orchestra_ops.client.retry import RetryPolicy
from orchestra_ops.client.routing import Routing
from orchestra_ops.client.sources import load_routing
from orchestra_ops.errors import ConfigError, Interrupted
from orchestra_ops.fsutil import atomic_write_text
from orchestra_ops.runner.context import RunContext
from orchestra_ops.runner.dataset import Sample, sample_id
from orchestra_ops.runner.engine import Controller, Record, run_tasks
from orchestra_ops.runner.limits import check_concurrency, raise_open_file_limit
from orchestra_ops.runner.manifest import check_dataset_unchanged, run_manifest
from orchestra_ops.runner.profile import ProfileWriter
from orchestra_ops.runner.progress import Progress, format_duration
from orchestra_ops.runner.results import ResultsStore
from orchestra_ops.runner.rundir import default_run_dir, read_run_info, write_run_info
from orchestra_ops.runner.suite import Suite, SuiteOption
from orchestra_ops.runner.tee import LOG_FILE, TeeLog
from orchestra_ops.runner.templates import Template, load_templates
from orchestra_ops.runner.toolbox import Toolbox

SCORES_FILE = "scores.json"


@dataclass
class EvalOptions:
    suite: str
    dataset: str | None = None
    run_dir: str | None = None
    resume: bool = False
    retry_failed: bool = False
    dedupe: bool = False
    concurrency: int = 32
    limit: int | None = None
    request_timeout_s: float | None = None
    task_timeout_s: float | None = None
    attempts: int = 3
    model: str | None = None  # the first --model (the chat suite's target)
    models: tuple[str, ...] = ()  # every --model, in order (default: (model,) when model is set)
    suite_options: dict[str, Any] = field(default_factory=dict)  # the suite's own flags, by SuiteOption.name
    templates: dict[str, str] = field(default_factory=dict)  # --template NAME=PATH
    topology: str | None = None
    model_config: str | None = None
    progress_interval_s: float = 5.0
    unavailable_wait_s: float = 60.0
    exec_workers: int | None = None  # sandboxed programs running at once (default: the cores)


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


@dataclass
class PreparedRun:
    options: EvalOptions
    suite: Suite
    routing: Routing
    run_dir: Path
    dataset: Path
    samples: list[Sample]  # the units of work of the dataset (after --limit), in order
    todo: list[Sample]
    store: ResultsStore
    names: list[str]
    task_timeout_s: float
    templates: dict[str, Template] = field(default_factory=dict)
    suite_options: dict[str, Any] = field(default_factory=dict)
    models: tuple[str, ...] = ()
    dataset_sha256: str | None = None


def suite_option_values(suite: Suite, given: dict[str, Any], recorded: dict[str, Any] | None = None) -> dict[str, Any]:
    """Each of the suite's options: the value given, else the one the run dir recorded, else its default.

    A given value that differs from the recorded one is a ConfigError: one run dir holds one setting.
    """
    declared: dict[str, SuiteOption] = {option.name: option for option in suite.options}
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise ConfigError(f"the {suite.name} suite has no option '{unknown[0]}'")
    before = {k: v for k, v in (recorded or {}).items() if k in declared}
    values = {}
    for name, option in declared.items():
        if name in given and name in before and _normal(given[name]) != _normal(before[name]):
            raise ConfigError(f"this run dir was run with {option.flag} {_shown(before[name])}, not "
                              f"{_shown(given[name])}; use another --run-dir for another setting")
        values[name] = given[name] if name in given else before.get(name, option.default)
    return values


def _normal(value: Any) -> Any:
    return list(value) if isinstance(value, (list, tuple)) else value


def _shown(value: Any) -> str:
    return " ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def _check_templates(run_dir: Path, templates: dict[str, Template], recorded: Any) -> None:
    """A run dir keeps the prompts it started with: a template whose bytes changed is a ConfigError."""
    if not isinstance(recorded, dict):
        return
    for name, template in templates.items():
        before = recorded.get(name)
        if isinstance(before, dict) and before.get("sha256") not in (None, template.sha256):
            raise ConfigError(f"{run_dir} was run with template '{name}' sha256 {str(before['sha256'])[:12]}… "
                              f"({before.get('source')}); {template.source} has sha256 {template.sha256[:12]}…; "
                              "use another --run-dir to ask other questions")


def prepare(options: EvalOptions) -> PreparedRun:
    """Every check that needs no network: suite, routing, dataset, run dir, which tasks to run."""
    from orchestra_ops.evals.registry import load_suite

    if options.concurrency < 1:
        raise ConfigError("--concurrency must be at least 1")
    suite = load_suite(options.suite)
    templates = load_templates(suite.template_files, options.templates, suite.template_fields)
    routing = load_routing(options.topology, options.model_config)
    run_dir = Path(options.run_dir) if options.run_dir else default_run_dir(suite.name, routing.name)
    info = read_run_info(run_dir) or {}
    continuing = options.resume or options.retry_failed
    suite_options = suite_option_values(suite, options.suite_options,
                                        info.get("suite_options") if continuing else None)
    if continuing:
        _check_templates(run_dir, templates, info.get("templates"))
    models = options.models or ((options.model,) if options.model else ())
    if not models and continuing and isinstance(info.get("models"), list):
        models = tuple(str(m) for m in info["models"])
    suite_view = {**suite_options, "model": models[0] if models else None, "models": list(models),
                  "templates": templates, "run_dir": str(run_dir)}
    names = suite.prepare(routing, suite_view)
    dataset = options.dataset or info.get("dataset") or suite.default_dataset
    if not dataset:
        raise ConfigError(f"the {suite.name} suite needs --dataset PATH (a JSONL file of {{\"id\", …}} lines)")
    dataset_path = Path(dataset).resolve()
    if info.get("dataset") and options.dataset and Path(info["dataset"]) != dataset_path:
        raise ConfigError(f"{run_dir} holds results for dataset {info['dataset']}, not {dataset_path}; "
                          "use another --run-dir")
    samples = suite.load(dataset_path, dedupe=options.dedupe)
    dataset_sha256 = check_dataset_unchanged(run_dir, info if continuing else {}, dataset_path)
    if options.limit is None and continuing and isinstance(info.get("limit"), int):
        options.limit = info["limit"]  # a continued run keeps the --limit it started with
    if options.limit is not None:
        samples = samples[: options.limit]
    samples = suite.units(samples, suite_view)
    store = ResultsStore(run_dir)
    if store.lines and not continuing:
        raise ConfigError(f"{run_dir} already has results ({len(store.ok_ids)} ok, {len(store.failed_ids)} "
                          "failed); pass --resume to finish it, --retry-failed to rerun its failures, or "
                          "--run-dir DIR for a new run (results are never overwritten)")
    todo = select_tasks(samples, store, resume=options.resume, retry_failed=options.retry_failed)
    request_timeout = options.request_timeout_s or routing.request_timeout_s
    task_timeout = options.task_timeout_s or (
        suite.calls_per_task * options.attempts * (request_timeout + RetryPolicy().backoff_max_s) + 60)
    return PreparedRun(options, suite, routing, run_dir, dataset_path, samples, todo, store, names, task_timeout,
                       templates, suite_options, models, dataset_sha256)


def select_tasks(samples: list[Sample], store: ResultsStore, *, resume: bool, retry_failed: bool) -> list[Sample]:
    """resume: ids with no result; retry_failed: ids whose last result is an error; both: either."""
    if not (resume or retry_failed):
        return list(samples)
    finished, failed = store.finished_ids, store.failed_ids
    return [s for s in samples
            if (resume and sample_id(s) not in finished) or (retry_failed and sample_id(s) in failed)]


def run_eval(run: PreparedRun, tee: TeeLog, progress: Progress | None = None) -> EvalSummary:
    """Run the prepared tasks; raise Interrupted (exit 130) after a clean stop on Ctrl-C.

    `progress`: the counters to update (a live display may be reading them); default: a new one.
    """
    options = run.options
    fleet = Fleet(run.routing, retry=RetryPolicy(attempts=options.attempts),
                  request_timeout_s=options.request_timeout_s, unavailable_wait_s=options.unavailable_wait_s)
    for name, cap in run.suite.limits(run.suite_options).items():
        fleet.limit(name, cap)
    soft, hard = raise_open_file_limit()
    check_concurrency(options.concurrency, fleet.replica_count(run.names), soft, hard)
    write_run_info(run.run_dir, {"suite": run.suite.name, "dataset": str(run.dataset), "source": run.routing.source,
                                 "topology": run.routing.name, "model": run.models[0] if run.models else None,
                                 "models": list(run.models), "limit": options.limit, "dedupe": options.dedupe,
                                 "suite_options": run.suite_options,
                                 "templates": {n: t.to_json() for n, t in run.templates.items()},
                                 **run_manifest(run, read_run_info(run.run_dir))})
    profile = ProfileWriter(run.run_dir)
    progress = progress or Progress(total=len(run.todo))

    def on_call(event: CallEvent) -> None:
        profile(event)
        progress.note_call(event.latency_s)

    fleet.on_call = on_call  # before any client exists: every client reports its calls
    for line in routing_lines(run.routing, run.names):
        tee.line(line)
    toolbox = Toolbox(fleet, exec_workers=options.exec_workers)
    for line in run.suite.routing_notes(toolbox):
        tee.line(f"  {line}")
    mode = "resume" if options.resume else "retry-failed" if options.retry_failed else "new run"
    tee.line(f"run dir {run.run_dir} ({mode}): {len(run.samples)} samples, {len(run.todo)} to run, "
             f"{len(run.store.ok_ids)} ok and {len(run.store.failed_ids)} failed before; concurrency "
             f"{options.concurrency}, task deadline {run.task_timeout_s:g} s, open-file limit {soft}")
    progress.started_at = time.monotonic()
    controller = Controller(on_stop=tee.line)
    start = time.monotonic()
    try:
        asyncio.run(_main(run, fleet, tee, progress, controller, profile, toolbox))
    finally:
        run.store.close()
        profile.close()
    elapsed = time.monotonic() - start
    tee.line(progress.line())
    summary = EvalSummary(run.run_dir, len(run.samples), progress.finished, progress.ok, progress.failed,
                          len(run.store.ok_ids), len(run.store.failed_ids), elapsed)
    if controller.stopping:
        missing = len(run.samples) - len(run.store.finished_ids)
        raise Interrupted(f"interrupted after {progress.finished} task(s) in {format_duration(elapsed)}; "
                          f"{missing} sample(s) have no result; continue with --resume (run dir {run.run_dir})")
    tee.line(f"finished {progress.finished} task(s) in {format_duration(elapsed)}: {progress.ok} ok, "
             f"{progress.failed} failed; run dir {run.run_dir} now has {summary.store_ok} ok, "
             f"{summary.store_failed} failed of {len(run.samples)}")
    summary.scores = write_scores(run)
    if summary.scores is not None:
        for line in run.suite.score_lines(summary.scores):
            tee.line(line)
        tee.line(f"scores written to {run.run_dir / SCORES_FILE}")
    return summary


def write_scores(run: PreparedRun) -> dict[str, Any] | None:
    """scores.json from the final record of every unit of the dataset (earlier invocations included)."""
    final = run.store.final_records()
    records = {sample_id(s): final[sample_id(s)] for s in run.samples if sample_id(s) in final}
    scores = run.suite.score(records, run.samples)
    if scores is not None:
        atomic_write_text(run.run_dir / SCORES_FILE, json.dumps(scores, indent=2, default=str) + "\n")
    return scores


def routing_lines(routing: Routing, names: list[str]) -> Iterator[str]:
    yield f"routing ({routing.source}):"
    rows = routing.table()
    width = max([len(r[0]) for r in rows] + [4])
    for role, label, kind, where in rows:
        mark = " *" if role in names else ""
        yield f"  {role:<{width}} -> {label} [{kind}] -> {where}{mark}"
    for name in names:
        if name not in routing.roles:
            _, target = routing.resolve(name)
            yield f"  {name:<{width}} -> {target.name} [{target.kind}] -> {target.where} *"
    yield "  (* called by this run; nothing else is contacted)"


async def _main(run: PreparedRun, fleet: Fleet, tee: TeeLog, progress: Progress, controller: Controller,
                profile: ProfileWriter, toolbox: Toolbox) -> None:
    loop = asyncio.get_running_loop()
    with _signals(loop, controller):
        ticker = loop.create_task(_tick(run, progress, tee, profile))
        try:
            await fleet.discover_limits(run.names)
            def done(record: Record, elapsed: float) -> None:
                run.store.append(record)
                progress.note_task(elapsed)
                tee.event(completion_line(record, elapsed, run.suite.summary_fields))

            previous = run.store.final_records() if run.options.retry_failed else {}

            def context(sample: Sample) -> RunContext:
                return RunContext(fleet, sample["id"], profile, previous.get(sample_id(sample)), toolbox)

            await run_tasks(run.todo, lambda sample: run.suite.run(sample, context(sample)),
                            concurrency=run.options.concurrency, task_timeout_s=run.task_timeout_s,
                            on_done=done, progress=progress, controller=controller)
        finally:
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker
            await fleet.close()


async def _tick(run: PreparedRun, progress: Progress, tee: TeeLog, profile: ProfileWriter) -> None:
    """Every interval: the progress line, and results/profile flushed even when tasks are slow."""
    while True:
        await asyncio.sleep(run.options.progress_interval_s)
        run.store.flush()
        profile.flush()
        tee.event(progress.line())


@contextlib.contextmanager
def _signals(loop: asyncio.AbstractEventLoop, controller: Controller) -> Iterator[None]:
    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, controller.interrupt)
            installed.append(sig)
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


def open_tee(run_dir: Path, console: Callable[[str], None] | None) -> TeeLog:
    return TeeLog(run_dir / LOG_FILE, console)


def completion_line(record: Record, elapsed: float, fields: Sequence[str] = ()) -> str:
    """`[TASK_COMPLETE] id=… status=ok|error elapsed=…s [error=KIND] [FIELD=VALUE…]`, one per finished unit."""
    line = f"[TASK_COMPLETE] id={record['id']} status={record['status']} elapsed={elapsed:.2f}s"
    if record["status"] != "ok":
        line += f" error={record.get('error_type')}"
    for name in fields:
        if name in record:
            line += f" {name}={record[name]}"
    return line
