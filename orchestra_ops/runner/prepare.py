"""Everything an `ops eval` checks before its first request: suite, options, templates, routing,
dataset, run dir and which units to run, so a bad run fails in a second with exit 2, not an hour in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestra_ops.client.retry import RetryPolicy
from orchestra_ops.client.sources import load_routing
from orchestra_ops.core.redact import Redactor
from orchestra_ops.core.redact import install as install_redactor
from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.dataset import Sample, sample_id
from orchestra_ops.runner.lock import RunDirLock
from orchestra_ops.runner.manifest import check_dataset_unchanged
from orchestra_ops.runner.options import EvalOptions, PreparedRun
from orchestra_ops.runner.results import ResultsStore
from orchestra_ops.runner.rundir import default_run_dir, read_run_info, recorded_dataset
from orchestra_ops.runner.suite import Suite, SuiteOption
from orchestra_ops.runner.templates import Template, load_templates


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


def prepare(options: EvalOptions, suite: Suite) -> PreparedRun:
    """Every check that needs no network: options, templates, routing, dataset, run dir, which tasks to run.

    `suite`: the Suite object (the caller looks it up in evals/registry.py). The returned run holds the run
    dir's lock (`lock`); the caller releases it when the run ends (api/session.py does, on every exit).
    """
    if options.concurrency < 1:
        raise ConfigError("--concurrency must be at least 1")
    templates = load_templates(suite.template_files, options.templates, suite.template_fields)
    routing = load_routing(options.topology, options.model_config)
    if options.affinity is not None:
        routing = routing.with_affinity(options.affinity)
    install_redactor(Redactor.from_env(routing.secret_variables()))  # from here on no provider key is stored/printed
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
                  "templates": templates, "run_dir": str(run_dir), "exec_unsafe": options.exec_unsafe}
    names = suite.prepare(routing, suite_view)
    if info.get("dataset"):
        info["dataset"] = recorded_dataset(str(info["dataset"]))  # a bundled set recorded before it moved
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
    if not samples:
        why = "--limit 0 selects none of them" if options.limit == 0 else "it has no samples"
        raise ConfigError(f"{dataset_path}: nothing to evaluate: {why}; an empty run would write a score of nothing")
    lock = RunDirLock.acquire(run_dir)  # before anything in the run dir is read for resume or written
    try:
        store = ResultsStore(run_dir)
        if store.lines and not continuing:
            raise ConfigError(f"{run_dir} already has results ({len(store.ok_ids)} ok, {len(store.failed_ids)} "
                              "failed); pass --resume to finish it, --retry-failed to rerun its failures, or "
                              "--run-dir DIR for a new run (results are never overwritten)")
    except BaseException:
        lock.release()
        raise
    todo = select_tasks(samples, store, resume=options.resume, retry_failed=options.retry_failed)
    request_timeout = options.request_timeout_s or routing.request_timeout_s
    task_timeout = options.task_timeout_s or (
        suite.calls_per_task * options.attempts * (request_timeout + RetryPolicy().backoff_max_s) + 60)
    return PreparedRun(options, suite, routing, run_dir, dataset_path, samples, todo, store, names, task_timeout,
                       templates, suite_options, models, dataset_sha256, lock)


def select_tasks(samples: list[Sample], store: ResultsStore, *, resume: bool, retry_failed: bool) -> list[Sample]:
    """resume: ids with no result; retry_failed: ids whose last result is an error; both: either."""
    if not (resume or retry_failed):
        return list(samples)
    finished, failed = store.finished_ids, store.failed_ids
    return [s for s in samples
            if (resume and sample_id(s) not in finished) or (retry_failed and sample_id(s) in failed)]
