"""`ops posttrain` / `orchestra_ops.api.posttrain`: one adapter in, base-vs-adapter scores and a verdict out.

    [--up: ops up TOPOLOGY]
    -> load the adapter into every replica of the base model (lora/runtime.py: checked first, all or none)
    -> the opencompass suite (evals/opencompass/multi.py) over --datasets, base and adapter side by side,
       through the one eval session (api/session.py's `evaluate`, passed in: this module sits below the
       API), in one run dir: OpenCompass's predictions/, results/, summary/summary.csv, our scores.json
    -> unload the adapter
    -> posttrain.json: per dataset base, adapter, adapter - base with its paired 95 % interval, a verdict
    [--down: ops down]

Verdict per dataset, from the headline's paired 95 % interval of adapter - base (a paired bootstrap
over all its samples, weighted as the headline is: multi_opencompass.py, opencompass/paired.py; it
exists whenever there are two or more paired samples): `pass` when the interval's lower end is above
-max_drop, `block` when its upper end is below -max_drop, `inconclusive` otherwise (the interval
holds -max_drop, or there is no interval), with an estimate of how many paired samples would decide
it (`samples_to_decide`). The run's verdict: `block` if any dataset blocks, else `incomplete` if one
has no score, else `inconclusive` if one is, else `pass`. posttrain.json records each interval and
how it was computed (`interval`).

Failures are our exceptions (errors.py): ConfigError (2) bad input, LaunchError (3) the fleet or the
adapter load, EvalError (4) units that failed (their datasets have no score), RunTimeout (124) the
wall-clock limit, Interrupted (130) a signal (a load it cuts short is rolled back). `--timeout` bounds
every step: `--up`'s readiness wait, the load (a replica that does not answer in time fails it, and it
is rolled back), the eval, and the unload (which gets at least UNLOAD_GRACE_S, so a run at its limit
leaves nothing loaded); a limit reached after every unit finished still scores. Nothing is lost on
any of them: the run dir keeps every finished unit and the same call again resumes it (and retries
its failed units).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from orchestra_ops import posttrain_steps as steps
from orchestra_ops.core.fsutil import atomic_write_text
from orchestra_ops.errors import ConfigError, EvalError, RunTimeout

if TYPE_CHECKING:
    from orchestra_ops.runner.options import EvalOptions

log = logging.getLogger(__name__)

POSTTRAIN_FILE = "posttrain.json"
SUITE = "opencompass"


class ScoredRun(Protocol):
    """What posttrain reads of the session's result (api's EvalResult): the run's scores."""

    @property
    def scores(self) -> dict[str, Any] | None: ...


class EvalSession(Protocol):
    """The one eval session, `orchestra_ops.api.evaluate`: the caller passes it in (the API is above this module)."""

    def __call__(self, options: EvalOptions, suite: str, *, console: Callable[[str], None] | None = None,
                 analyze: bool = True) -> ScoredRun: ...


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


def verdict(ci95: Sequence[float] | None, max_drop: float) -> str:
    """pass / block / inconclusive from the interval of adapter - base (see the module doc)."""
    if not ci95:
        return "inconclusive"
    if ci95[0] > -max_drop:
        return "pass"
    if ci95[1] < -max_drop:
        return "block"
    return "inconclusive"


def samples_to_decide(difference: float, ci95: Sequence[float] | None, n: int, max_drop: float) -> dict[str, Any]:
    """How many paired samples would likely decide an inconclusive verdict, and how that was estimated.

    The interval's half-width shrinks as 1/sqrt(n). If the difference and the spread per sample stay as
    measured, the side of the interval facing -max_drop (lower for a difference above it, upper below)
    clears it once n' > n * (that side's width / |difference + max_drop|)^2.
    """
    how = ("n * (w / |d + max_drop|)^2, w the side of the interval facing -max_drop: its half-width shrinks as "
           "1/sqrt(n); assumes the difference d and the spread per sample stay as measured (a naive average's "
           "subsets growing in proportion)")
    if not ci95:
        return {"samples": None, "how": f"{n} paired sample(s): no interval under 2; run more (a larger --sample, "
                "or none) to measure the spread"}
    margin = difference + max_drop
    side = difference - ci95[0] if margin > 0 else ci95[1] - difference
    if margin == 0 or side <= 0:
        return {"samples": None, "how": f"the difference is {difference:+g}, on -max_drop itself: no number of "
                "samples decides it if it stays there"}
    return {"samples": math.floor(n * (side / abs(margin)) ** 2) + 1, "how": how}


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


def default_run_dir(adapter: str, topology: str) -> Path:
    return Path("runs") / f"posttrain-{adapter.replace('/', '_')}-{topology}"


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


def inconclusive_message(result: Mapping[str, Any]) -> str:
    """One line per inconclusive dataset: its interval and the samples that would likely decide it."""
    parts = []
    for name, row in result["datasets"].items():
        if row["verdict"] != "inconclusive":
            continue
        ci = row["ci95"]
        span = f"95% interval [{ci[0]:+.2f}, {ci[1]:+.2f}] holds -{result['max_drop']:g}" if ci else "no interval"
        need = row["samples_to_decide"]["samples"]
        more = f"about {need} paired samples would decide it" if need else "more samples may not decide it"
        parts.append(f"{name}: adapter - base {row['delta']:+.2f} points, {span} ({row['n']} paired); {more}")
    return "inconclusive: " + "; ".join(parts)
