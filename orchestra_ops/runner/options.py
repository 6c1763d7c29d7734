"""What one eval is asked to do (EvalOptions) and what `prepare` made of it (PreparedRun).

Plain data, below prepare.py, manifest.py and evalrun.py, which all read them: none of those imports
another for its types. The suite is not an option: the caller looks it up (evals/registry.py) and
passes the Suite object in; the runner never imports a suite.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestra_ops.client.affinity import AffinityMode
from orchestra_ops.client.routing import Routing
from orchestra_ops.runner.dataset import Sample
from orchestra_ops.runner.lock import RunDirLock
from orchestra_ops.runner.results import ResultsStore
from orchestra_ops.runner.suite import Suite
from orchestra_ops.runner.templates import Template


@dataclass
class EvalOptions:
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
    exec_unsafe: bool = False  # run model-written code without bubblewrap where it cannot isolate (else exit 2)
    cache: str | None = None  # --cache: the response cache's SQLite file (None: no cache)
    cache_sampled: bool = False  # --cache-sampled: cache requests with temperature > 0 too
    wall_timeout_s: float | None = None  # stop starting units after this long; in-flight ones are abandoned
    stall_after_s: float | None = None  # no task finished for this long: a stall report (default: monitor.py)
    notify: str | None = None  # a command fed each run event as JSON on stdin (runner/events.py)
    supervised: bool = False  # run by `ops eval --detach`'s supervisor, which sends the end-of-run event
    affinity: AffinityMode | None = None  # --affinity: every model's routing.affinity (None: the topology's)
    max_cost: float | None = None  # --max-cost USD: stop taking tasks once the run dir's spend passes it (spend.py)


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
    lock: RunDirLock | None = None  # the run dir's exclusive lock; the caller releases it when the run ends
