"""One eval session: the only place an eval is run, whichever way it is asked for.

`ops eval` (and so the supervised child of `ops eval --detach`: the supervisor runs `ops eval …`,
with `--resume` after a crash), `ops posttrain`, the benches and any script call `evaluate`:

    prepare (runner/prepare.py: every check that needs no network; takes the run dir's lock)
    -> the tee (eval.log) and warnings logged under `orchestra_ops` routed through it
    -> the start banner (runner/banner.py: at most 6 lines; the routing table, aliases, budgets and
       sandbox go to eval.log, and to the console with `verbose`)
    -> the progress display the caller passed, around
       run_eval (runner/evalrun.py: build, loop, finish; writes results, profile, scores.json)
    -> the analysis (analysis/: stats.json, plots, report.html) unless told not to
    -> the one result line: each model's score ± its 95 % interval, n, wall time, calls, tokens, cost
    -> everything released, on every exit: success, an OpsError, Ctrl-C/SIGTERM (Interrupted),
       DiskFull, RunTimeout, any other exception: the handler removed, eval.log closed, the lock
       released (a second run on the run dir then starts at once)

The library never prints: the caller passes the console line sink, the alert sink (a line the user
must not miss) and the progress-display context factory. An OpsError is also written to eval.log
as `error: …`; it is raised for the caller to show.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestra_ops.errors import OpsError
from orchestra_ops.runner.banner import RunFacts, banner, result_line
from orchestra_ops.runner.evalrun import SCORES_FILE, EvalSummary, run_eval
from orchestra_ops.runner.options import EvalOptions, PreparedRun
from orchestra_ops.runner.prepare import prepare
from orchestra_ops.runner.progress import Progress
from orchestra_ops.runner.results import RESULTS_FILE
from orchestra_ops.runner.suite import Suite
from orchestra_ops.runner.tee import LOG_FILE, TeeHandler, TeeLog

if TYPE_CHECKING:
    from orchestra_ops.analysis.outcome import Analysis

LineSink = Callable[[str], None]
# (tee, progress, run dir) -> a context entered around the run: a live panel, a stopwatch, …
ProgressDisplay = Callable[[TeeLog, Progress, Path], AbstractContextManager[Any]]
LOGGER = "orchestra_ops"  # warnings of the library during a run go to eval.log (and the console)


@dataclass(frozen=True)
class EvalResult:
    """What one `evaluate` did and where its files are."""

    run_dir: Path
    suite: str
    dataset: Path
    units: int  # units of work of the run dir's dataset (after --limit)
    ran: int  # units this call ran (ok or error)
    ok: int  # of those, ok
    failed: int  # of those, error
    total_ok: int  # the run dir as a whole, earlier calls included
    total_failed: int
    elapsed_s: float  # the run itself: its requests, their results, closing the run's files
    scores: dict[str, Any] | None  # scores.json (None: the suite has no score)
    scoring_s: float | None  # writing scores.json and the suite's outputs
    results_file: Path
    log_file: Path
    scores_file: Path | None
    stats_file: Path | None  # analysis/stats.json (None: not analysed, or the analysis failed: see eval.log)
    report_file: Path | None  # analysis/report.html

    @property
    def missing(self) -> int:
        """Units of the dataset with no result yet (`--resume` runs them)."""
        return self.units - self.total_ok - self.total_failed


def evaluate(options: EvalOptions, suite: Suite | str, *, console: LineSink | None = None,
             alert_console: LineSink | None = None, display: ProgressDisplay | None = None,
             analyze: bool = True, verbose: bool = False) -> EvalResult:
    """Run one eval of `suite` (a Suite object, or a registered suite's name) as `options` say.

    `console` gets every line eval.log gets (the `[TASK_COMPLETE]`/progress lines while no display
    replaces them); `alert_console` the lines the user must not miss (default: `console`); `display`
    is entered around the run; `verbose`: the details (routing, aliases, budgets, sandbox, per-suite score
    tables) on the console too, not only in eval.log. Raises ConfigError (2) before anything runs,
    LaunchError (3), EvalError and DiskFull (4), SpendLimit (5), RunTimeout (124), Interrupted (130); the run
    dir keeps every finished unit and `resume=True` continues it.
    """
    run = prepare(options, registered(suite) if isinstance(suite, str) else suite)  # takes the run dir's lock
    try:
        tee = TeeLog(run.run_dir / LOG_FILE, console, alert_console)
        tee.verbose = verbose
        try:
            with _warnings_to(tee, only_there=console is not None):
                return _run(run, tee, display, analyze)
        finally:
            tee.close()
    finally:
        if run.lock is not None:
            run.lock.release()


def check_eval(options: EvalOptions, suite: Suite | str) -> PreparedRun:
    """Every check `evaluate` makes before it calls a model (a ConfigError here, not an hour later), then
    everything released: the lock is free for the run that follows (the supervised `ops eval`)."""
    run = prepare(options, registered(suite) if isinstance(suite, str) else suite)
    try:
        run.store.close()
    finally:
        if run.lock is not None:
            run.lock.release()
    return run


def registered(name: str) -> Suite:
    """The suite registered under `name` (evals/registry.py); a ConfigError naming the suites if none is."""
    from orchestra_ops.evals.registry import load_suite  # only that suite's modules are imported

    return load_suite(name)


def _run(run: PreparedRun, tee: TeeLog, display: ProgressDisplay | None, analyze: bool) -> EvalResult:
    progress = Progress(total=len(run.todo))
    try:
        for line in banner(_facts(run), run.routing, run.names, verbose=tee.verbose):
            tee.line(line)
        with (display or _no_display)(tee, progress, run.run_dir):
            summary = run_eval(run, tee, progress)
        analysis = analyze_at_end(run.run_dir, tee) if analyze else None
        tee.line(result_line(run.suite.name, summary.scores, ok=summary.store_ok, failed=summary.store_failed,
                             total=summary.dataset_size, wall_s=summary.elapsed_s, calls=summary.calls,
                             tokens=summary.tokens, run_dir=run.run_dir))
    except OpsError as exc:
        tee.file_line(f"error: {exc}")  # the caller shows it (the CLI: on stderr, from the command group)
        raise
    return _result(run, summary, analysis)


def _facts(run: PreparedRun) -> RunFacts:
    options = run.options
    mode = "resume" if options.resume else "retry-failed" if options.retry_failed else "new run"
    return RunFacts(run.suite.name, run.routing.name, run.run_dir, len(run.samples), len(run.todo),
                    len(run.store.ok_ids), len(run.store.failed_ids), mode)


def _result(run: PreparedRun, summary: EvalSummary, analysis: Analysis | None) -> EvalResult:
    return EvalResult(run_dir=run.run_dir, suite=run.suite.name, dataset=run.dataset, units=summary.dataset_size,
                      ran=summary.ran, ok=summary.ok, failed=summary.failed, total_ok=summary.store_ok,
                      total_failed=summary.store_failed, elapsed_s=summary.elapsed_s, scores=summary.scores,
                      scoring_s=summary.scoring_s, results_file=run.run_dir / RESULTS_FILE,
                      log_file=run.run_dir / LOG_FILE,
                      scores_file=run.run_dir / SCORES_FILE if summary.scores is not None else None,
                      stats_file=analysis.stats_path if analysis is not None else None,
                      report_file=analysis.report if analysis is not None else None)


@contextlib.contextmanager
def _no_display(tee: TeeLog, progress: Progress, run_dir: Path) -> Iterator[None]:
    yield


@contextlib.contextmanager
def _warnings_to(tee: TeeLog, *, only_there: bool) -> Iterator[None]:
    """Warnings logged under `orchestra_ops` during the run go through the tee (eval.log, the console);
    `only_there`: not again through the root logger's handlers (the tee already showed them)."""
    logger = logging.getLogger(LOGGER)
    handler = TeeHandler(tee)
    propagate = logger.propagate
    logger.addHandler(handler)
    if only_there:
        logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def analyze_at_end(run_dir: Path, tee: TeeLog) -> Analysis | None:
    """`ops analyze` on the finished run; its failure is a warning (the results are safe already): None."""
    from orchestra_ops.analysis.analyze import analyze_run
    from orchestra_ops.analysis.placement import placement_lines

    tee.detail(f"analysing {run_dir} (skip with --no-analyze) ...")
    try:
        result = analyze_run(run_dir)
    except (OpsError, OSError, ValueError) as exc:
        tee.line(f"warning: the analysis failed: {exc}; the results are complete; retry with `ops analyze {run_dir}`")
        return None
    if result.plot_note:
        tee.detail(f"note: {result.plot_note}")
    for line in placement_lines(result.stats.get("placement") or {}):  # a note (a restart, other traffic) is shown
        (tee.line if line.lstrip().startswith("note:") else tee.detail)(line)
    tee.detail(f"stats: {result.stats_path}")
    tee.line(f"report: {result.report}")
    return result
