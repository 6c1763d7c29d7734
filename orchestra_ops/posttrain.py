"""`ops posttrain` / `orchestra_ops.api.posttrain`: one adapter in, base-vs-adapter scores and a verdict out.

    [--up: ops up TOPOLOGY]
    -> load the adapter into every replica of the base model (lora/runtime.py: checked first, all or none)
    -> the opencompass suite (evals/opencompass/multi.py) over --datasets, base and adapter side by side,
       one run dir: OpenCompass's predictions/, results/, summary/summary.csv, our scores.json
    -> unload the adapter
    -> posttrain.json: per dataset base, adapter, adapter - base with its paired 95 % interval, a verdict
    [--down: ops down]

Verdict per dataset: `block` when the adapter is worse than base by more than `max_drop` points
beyond the interval, i.e. the whole paired 95 % interval of adapter - base lies below -max_drop (with
fewer than two paired samples there is no interval and the point difference decides); else `pass`.
The run's verdict is `block` if any dataset blocks.

Failures are our exceptions (errors.py): ConfigError (2) bad input, LaunchError (3) the fleet or the
adapter load, EvalError (4) units that failed (their datasets have no score), RunTimeout (124) the
wall-clock limit. Nothing is lost on any of them: the run dir keeps every finished unit and the same
call again resumes it (and retries its failed units).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestra_ops.core.fsutil import atomic_write_text
from orchestra_ops.errors import ConfigError, EvalError, OpsError, RunTimeout

log = logging.getLogger(__name__)

POSTTRAIN_FILE = "posttrain.json"
SUITE = "opencompass"


@dataclass
class PosttrainOptions:
    topology: str  # a topology file, or the name of a topology that is up
    model: str  # the base model: key, served name or role
    adapter: str  # NAME=DIR
    datasets: str | Sequence[str] = "gsm8k,mmlu"
    max_drop: float = 1.0  # points
    timeout_s: float | None = 3600.0  # the whole call: up, load, eval, unload
    up: bool = False
    down: bool = False
    run_dir: str | None = None  # default runs/posttrain-<adapter>-<topology>
    concurrency: int = 64
    dataset_dirs: Mapping[str, str] = field(default_factory=dict)
    dataset_root: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    sample: int | None = None
    seed: int | None = None
    cache: str | None = None
    cache_sampled: bool = False
    attempts: int = 3
    request_timeout_s: float | None = None
    load_timeout_s: float = 300.0


def parse_adapter(spec: str) -> tuple[str, Path]:
    name, sep, directory = spec.partition("=")
    if not sep or not name.strip() or not directory.strip():
        raise ConfigError(f"--adapter {spec!r}: expected NAME=DIR (e.g. ft=./output/checkpoint-200)")
    path = Path(directory.strip()).expanduser()
    if not path.is_dir():
        raise ConfigError(f"--adapter {name.strip()}={directory.strip()}: no such directory")
    return name.strip(), path.absolute()


def verdict(difference: float, ci95: Sequence[float] | None, max_drop: float) -> str:
    worst_plausible = ci95[1] if ci95 else difference
    return "block" if worst_plausible < -max_drop else "pass"


def posttrain(options: PosttrainOptions, *, console: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run it all (see the module doc); return what posttrain.json holds. `console` gets the run's log lines."""
    from orchestra_ops.evals.opencompass.multi import parse_datasets

    started = time.monotonic()
    name, adapter_dir = parse_adapter(options.adapter)
    datasets = parse_datasets(options.datasets)
    if options.max_drop < 0:
        raise ConfigError(f"--max-drop {options.max_drop:g}: must be 0 or more points")
    if options.timeout_s is not None and options.timeout_s <= 0:
        raise ConfigError(f"--timeout {options.timeout_s:g}: must be more than 0 seconds")
    topology = _topology_name(options)
    fleet_started = False
    try:
        if options.up:
            _bring_up(options, topology, console)
            fleet_started = True
        _load(name, adapter_dir, options, topology)
        try:
            scores, run_dir = _evaluate(options, name, datasets, topology, started, console)
        finally:
            _unload(name, topology)
        result = _result(options, name, adapter_dir, datasets, scores, run_dir, started)
        atomic_write_text(run_dir / POSTTRAIN_FILE, json.dumps(result, indent=2) + "\n")
        if result["incomplete"]:
            raise EvalError(f"{', '.join(result['incomplete'])}: no score (units failed or are missing; "
                            f"see {run_dir / 'scores.json'}); the same call again resumes and retries them; "
                            f"{run_dir / POSTTRAIN_FILE} has the rest")
        return result
    finally:
        if options.down and (fleet_started or not options.up):
            _bring_down(topology)


def _topology_name(options: PosttrainOptions) -> str:
    from orchestra_ops.config.loader import load_topology

    if Path(options.topology).is_file():
        return load_topology(options.topology).name
    if options.up:
        raise ConfigError(f"--up needs a topology file; {options.topology}: no such file")
    return options.topology


def _bring_up(options: PosttrainOptions, topology: str, console: Callable[[str], None] | None) -> None:
    """`ops up`; a fleet that is up already (a rerun after a time-out without --down) is used as it is."""
    from orchestra_ops.core.paths import state_path
    from orchestra_ops.fleet import lifecycle
    from orchestra_ops.fleet.state import read_state

    if state_path(topology).is_file() and read_state(topology).status == "up":
        if console:
            console(f"fleet '{topology}' is up already; using it")
        return
    result = lifecycle.up(options.topology, lifecycle.UpOptions(replace=False))
    if console:
        console(f"fleet '{result.state.name}' is up ({result.endpoints_file})")


def _bring_down(topology: str) -> None:
    from orchestra_ops.fleet import lifecycle

    try:
        lifecycle.down(topology)
    except OpsError as exc:  # the verdict (or the first error) matters more; say it and move on
        log.warning("ops down %s: %s", topology, exc)


def _load(name: str, adapter_dir: Path, options: PosttrainOptions, topology: str) -> None:
    """Load the adapter everywhere (all or none); a rerun that finds it loaded from the same dir uses it."""
    from orchestra_ops.fleet.lora_records import read_records
    from orchestra_ops.fleet.state import read_state
    from orchestra_ops.lora.runtime import load_adapter

    existing = read_records(read_state(topology)).get(name)
    if existing is not None and Path(existing.path) == adapter_dir:
        log.info("'%s' is already loaded from %s (an earlier call); using it", name, adapter_dir)
        return
    load_adapter(name, str(adapter_dir), model=options.model, topology=topology, timeout_s=options.load_timeout_s)


def _unload(name: str, topology: str) -> None:
    from orchestra_ops.lora.runtime import unload_adapter

    try:
        unload_adapter(name, topology=topology)
    except OpsError as exc:
        log.warning("unloading '%s': %s", name, exc)


def default_run_dir(adapter: str, topology: str) -> Path:
    return Path("runs") / f"posttrain-{adapter.replace('/', '_')}-{topology}"


def _evaluate(options: PosttrainOptions, adapter: str, datasets: list[str], topology: str, started: float,
              console: Callable[[str], None] | None) -> tuple[dict[str, Any], Path]:
    from orchestra_ops.runner.evalrun import open_tee, run_eval
    from orchestra_ops.runner.prepare import EvalOptions, prepare
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
    if options.timeout_s is not None:
        remaining = options.timeout_s - (time.monotonic() - started)
        if remaining <= 0:
            raise RunTimeout(f"the {options.timeout_s:g} s limit passed before the eval started (fleet and "
                             "adapter load); the same call again continues")
    eval_options = EvalOptions(suite=SUITE, dataset=options.dataset_root, run_dir=str(run_dir), resume=again,
                               retry_failed=again, concurrency=options.concurrency, attempts=options.attempts,
                               request_timeout_s=options.request_timeout_s, model=options.model,
                               models=(options.model, adapter), suite_options=suite_options, topology=topology,
                               cache=options.cache, cache_sampled=options.cache_sampled, wall_timeout_s=remaining)
    run = prepare(eval_options)
    tee = open_tee(run.run_dir, console)
    try:
        summary = run_eval(run, tee)
    except RunTimeout as exc:
        raise RunTimeout(f"--timeout {options.timeout_s:g} s: {exc}") from None
    finally:
        tee.close()
    if summary.scores is None:
        raise EvalError(f"{run_dir}: the run produced no scores")
    return summary.scores, run_dir


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
                          "ci95": None, "n": None, "verdict": None}
            continue
        ci95 = interval.get("ci95")
        rows[name] = {"row": head["row"], "metric": head["metric"], "base": round(b, 4), "adapter": round(a, 4),
                      "delta": interval["difference"], "ci95": ci95, "n": interval["n"],
                      "verdict": verdict(interval["difference"], ci95, options.max_drop)}
    verdicts = [row["verdict"] for row in rows.values()]
    overall = "block" if "block" in verdicts else ("incomplete" if incomplete else "pass")
    return {"verdict": overall, "base": base, "adapter": {"name": adapter, "path": str(adapter_dir)},
            "max_drop": options.max_drop, "datasets": rows, "incomplete": incomplete,
            "run_dir": str(run_dir), "summary_csv": str(run_dir / "summary" / "summary.csv"),
            "scores_json": str(run_dir / "scores.json"), "cache": scores.get("cache"),
            "elapsed_s": round(time.monotonic() - started, 3),
            "rule": f"block when the paired 95% interval of adapter - base lies wholly below -{options.max_drop:g}"}
