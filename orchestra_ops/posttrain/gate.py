"""The whole `ops posttrain` call: up, load, the eval through the session, unload, posttrain.json, down."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from orchestra_ops.core.fsutil import atomic_write_text
from orchestra_ops.errors import ConfigError, EvalError, RunTimeout
from orchestra_ops.posttrain import steps
from orchestra_ops.posttrain.decision import samples_to_decide, verdict
from orchestra_ops.posttrain.options import (
    POSTTRAIN_FILE,
    SUITE,
    EvalSession,
    PosttrainOptions,
    default_run_dir,
    parse_adapter,
)


def posttrain(options: PosttrainOptions, *, session: EvalSession,
              console: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run it all (see the module doc); return what posttrain.json holds. `session` runs the eval (the API's
    `evaluate`: orchestra_ops.api.training.run_posttrain passes it); `console` gets the run's log lines."""
    from orchestra_ops.evals.opencompass.multi import parse_datasets

    started = time.monotonic()
    name, adapter_dir = parse_adapter(options.adapter)
    datasets = parse_datasets(options.datasets)
    if options.max_drop < 0:
        raise ConfigError(f"--max-drop {options.max_drop:g}: must be 0 or more points")
    if options.timeout_s is not None and options.timeout_s <= 0:
        raise ConfigError(f"--timeout {options.timeout_s:g}: must be more than 0 seconds")
    topology = _topology_name(options)
    limit = steps.Deadline(options.timeout_s, started)
    fleet_started = False
    try:
        if options.up:
            steps.bring_up(options, topology, console, limit)
            fleet_started = True
        steps.load(name, adapter_dir, options, topology, console, limit)
        try:
            scores, run_dir = _evaluate(options, session, name, datasets, topology, started, console)
        finally:
            steps.unload(name, topology, console, limit)
        result = _result(options, name, adapter_dir, datasets, scores, run_dir, started)
        atomic_write_text(run_dir / POSTTRAIN_FILE, json.dumps(result, indent=2) + "\n")
        if result["incomplete"]:
            raise EvalError(f"{', '.join(result['incomplete'])}: no score (units failed or are missing; "
                            f"see {run_dir / 'scores.json'}); the same call again resumes and retries them; "
                            f"{run_dir / POSTTRAIN_FILE} has the rest")
        return result
    finally:
        if options.down and (fleet_started or not options.up):
            steps.bring_down(topology)


def _topology_name(options: PosttrainOptions) -> str:
    from orchestra_ops.config.loader import load_topology

    if Path(options.topology).is_file():
        return load_topology(options.topology).name
    if options.up:
        raise ConfigError(f"--up needs a topology file; {options.topology}: no such file")
    return options.topology


def _evaluate(options: PosttrainOptions, session: EvalSession, adapter: str, datasets: list[str], topology: str,
              started: float, console: Callable[[str], None] | None) -> tuple[dict[str, Any], Path]:
    from orchestra_ops.runner.options import EvalOptions
    from orchestra_ops.runner.results import RESULTS_FILE

    run_dir = Path(options.run_dir) if options.run_dir else default_run_dir(adapter, topology)
    results = run_dir / RESULTS_FILE
    again = results.is_file() and results.stat().st_size > 0  # a rerun continues the run dir
    suite_options: dict[str, Any] = {"datasets": ",".join(datasets)}
    if options.dataset_dirs:
        suite_options["dataset_dirs"] = [f"{k}={v}" for k, v in options.dataset_dirs.items()]
    for key in ("max_tokens", "temperature", "sample", "seed"):
        if getattr(options, key) is not None:
            suite_options[key] = getattr(options, key)
    remaining = None
    if options.timeout_s is not None:  # what is left (a run dir whose units all finished still scores)
        remaining = max(options.timeout_s - (time.monotonic() - started), 0.001)
    eval_options = EvalOptions(dataset=options.dataset_root, run_dir=str(run_dir), resume=again,
                               retry_failed=again, concurrency=options.concurrency, attempts=options.attempts,
                               request_timeout_s=options.request_timeout_s, model=options.model,
                               models=(options.model, adapter), suite_options=suite_options, topology=topology,
                               cache=options.cache, cache_sampled=options.cache_sampled, wall_timeout_s=remaining)
    try:  # the one eval session: the lock, eval.log and the logging handlers are released on every exit
        result = session(eval_options, SUITE, console=console, analyze=False)
    except RunTimeout as exc:
        raise RunTimeout(f"--timeout {options.timeout_s:g} s: {exc}") from None
    if result.scores is None:
        raise EvalError(f"{run_dir}: the run produced no scores")
    return result.scores, run_dir


def _result(options: PosttrainOptions, adapter: str, adapter_dir: Path, datasets: list[str],
            scores: Mapping[str, Any], run_dir: Path, started: float) -> dict[str, Any]:
    base = options.model
    rows: dict[str, Any] = {}
    incomplete: list[str] = []
    for name in datasets:
        head = scores["headline"][name]
        b, a = head["scores"].get(base), head["scores"].get(adapter)
        interval = head["comparisons"].get(adapter)
        if b is None or a is None or interval is None:
            incomplete.append(name)
            rows[name] = {"row": head["row"], "metric": head["metric"], "base": b, "adapter": a, "delta": None,
                          "ci95": None, "n": None, "interval": None, "verdict": None, "samples_to_decide": None}
            continue
        ci95 = interval.get("ci95")
        decided = verdict(ci95, options.max_drop)
        rows[name] = {"row": head["row"], "metric": head["metric"], "base": round(b, 4), "adapter": round(a, 4),
                      "delta": interval["difference"], "ci95": ci95, "n": interval["n"],
                      "interval": interval.get("method"), "verdict": decided,
                      "samples_to_decide": None if decided != "inconclusive" else
                      samples_to_decide(interval["difference"], ci95, interval["n"], options.max_drop)}
    verdicts = [row["verdict"] for row in rows.values()]
    overall = ("block" if "block" in verdicts else "incomplete" if incomplete
               else "inconclusive" if "inconclusive" in verdicts else "pass")
    return {"verdict": overall, "base": base, "adapter": {"name": adapter, "path": str(adapter_dir)},
            "max_drop": options.max_drop, "datasets": rows, "incomplete": incomplete,
            "run_dir": str(run_dir), "summary_csv": str(run_dir / "summary" / "summary.csv"),
            "scores_json": str(run_dir / "scores.json"), "cache": scores.get("cache"),
            "elapsed_s": round(time.monotonic() - started, 3),
            "rule": f"pass when the paired 95% interval of adapter - base lies wholly above -{options.max_drop:g}, "
                    f"block when wholly below, inconclusive otherwise"}
