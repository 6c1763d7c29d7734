"""The interface an eval suite implements (suites live in evals/ and register in evals/registry.py).

A suite is a class deriving from `BaseSuite` that declares, as data:

    name, default_dataset, calls_per_task   what it is, what it runs on by default, how long a task may take
    options          its own `ops eval SUITE` flags (SuiteOption), passed to `prepare` by name
    template_files   its prompt templates: name -> the packaged file (`--template NAME=PATH` replaces one)
    template_fields  the placeholders each template must contain (checked when it is loaded)
    summary_fields   record fields shown on each `[TASK_COMPLETE]` line (e.g. `correct`)
    dataset_example  one line of the dataset it reads, as its bad-input errors quote it

and implements `prepare` (check options against the routing, return every name it will call) and
`run` (one unit of work). Optional hooks with defaults: `load` (dataset file -> samples), `units`
(samples -> the units of work: e.g. one per sample x model), `limits` (caps on calls in flight per
role, e.g. a judge's own concurrency), `score` (the final record of every unit -> scores.json),
`headline` (each model's score with its 95 % interval, the run's one line: core/headline.py) and
`routing_notes` (lines shown under the routing table: tool aliases, tokenizer, sandbox; an `Alert`
among them is shown in red: e.g. code that runs without the sandbox's isolation).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from orchestra_ops.client.call_errors import CallError
from orchestra_ops.client.chat import ChatResult, Message
from orchestra_ops.client.retrieval import RetrievalResult, RetrievalSettings
from orchestra_ops.client.routing import Routing
from orchestra_ops.client.tokenizer import Tokenizer
from orchestra_ops.core.headline import Headline
from orchestra_ops.runner.dataset import Sample, load_dataset, sample_id
from orchestra_ops.runner.profile import ToolEvent
from orchestra_ops.runner.results import TaskId
from orchestra_ops.runner.templates import Template
from orchestra_ops.runner.toolbox import Toolbox
from orchestra_ops.sandbox import ExecResult, SandboxPolicy

OptionKind = Literal["int", "float", "str", "path", "flag", "choice"]


class Alert(str):
    """A routing note the user must not miss: the console shows it in red (eval.log as any line)."""


@dataclass(frozen=True)
class SuiteOption:
    """One flag of `ops eval SUITE`, declared by the suite (the CLI turns it into a click option).

    `name` is the key in the options mapping `prepare` receives; `flag` the command-line spelling;
    `everyday` lists it among the common options of `ops eval SUITE --help` (the rest: advanced).
    """

    name: str
    flag: str
    kind: OptionKind
    help: str
    default: Any = None
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    multiple: bool = False
    everyday: bool = False


class UnitFailed(CallError):
    """Raised by `run` for a unit that failed but did work worth keeping (e.g. the rubric grades
    that did come back): it is stored as status `error` with `kind` as its error_type and `fields`
    beside it, so `--retry-failed` reruns it and `ctx.previous` hands those fields back."""

    def __init__(self, kind: str, message: str, fields: Mapping[str, Any]) -> None:
        super().__init__(kind, message)
        self.fields = dict(fields)


class TaskContext(Protocol):
    """What a suite may do while it runs one unit: only through the engine (routed, bounded, profiled)."""

    task_id: TaskId
    previous: dict[str, Any] | None  # this unit's last stored record when it is rerun (--retry-failed)

    async def chat(self, name: str, messages: Sequence[Message], **params: Any) -> ChatResult:
        """A chat call to a role, model or provider the routing declares."""
        ...

    def record(self, event: ToolEvent) -> None:
        """Add a tool-call event to profile.jsonl (model calls are recorded by the engine itself)."""
        ...

    async def retrieve(self, services: Sequence[str], query: str, *, topk: int, eid: Any,
                       settings: RetrievalSettings | None = None) -> RetrievalResult:
        """POST /retrieve on the first of `services` that answers; never raises (see RetrievalResult.error)."""
        ...

    async def execute(self, code: str, policy: SandboxPolicy | None = None) -> ExecResult:
        """Run model-written code in the run's sandbox."""
        ...

    def tokenizer(self, name: str) -> Tokenizer:
        """The tokenizer of the model a role or model key resolves to."""
        ...


class Suite(Protocol):
    name: str
    default_dataset: str | None  # used when --dataset is not given (None: --dataset is required)
    calls_per_task: int  # the most model calls one task makes (sets the default task deadline)
    options: tuple[SuiteOption, ...]
    template_files: Mapping[str, str]
    template_fields: Mapping[str, tuple[str, ...]]
    summary_fields: tuple[str, ...]
    dataset_example: str

    def load(self, path: Path, *, dedupe: bool) -> list[Sample]: ...

    def units(self, samples: list[Sample], options: Mapping[str, Any]) -> list[Sample]:
        """The units of work of these samples (`options` as `prepare` gets them); each has a unique `id`."""
        ...

    def prepare(self, routing: Routing, options: Mapping[str, Any]) -> list[str]:
        """Check options against the routing; return every role/model name the run will call.

        `options` holds `model` (the first --model or None), `models` (every --model), `templates`
        (name -> Template, already loaded), `run_dir` (where a suite may write files of its own
        when it scores) and each SuiteOption's value under its name.
        """
        ...

    async def run(self, sample: Sample, ctx: TaskContext) -> dict[str, Any]:
        """Run one unit; return the fields stored with it. A failed call raises CallError."""
        ...

    def limits(self, options: Mapping[str, Any]) -> Mapping[str, int]:
        """Caps on calls in flight per role or model (e.g. a judge's own concurrency), applied before the run."""
        ...

    def score(self, records: Mapping[TaskId, dict[str, Any]], units: list[Sample]) -> dict[str, Any] | None:
        """scores.json from the final record of each unit of the dataset (None: the suite has no score)."""
        ...

    def score_lines(self, scores: Mapping[str, Any]) -> list[str]:
        """The scores as eval.log (and the console with -v) show them at the end of a run."""
        ...

    def headline(self, scores: Mapping[str, Any], records: Mapping[TaskId, dict[str, Any]],
                 units: list[Sample]) -> Headline | None:
        """The score of each model with its 95 % interval (core/headline.py), from what `score` returned."""
        ...

    def routing_notes(self, toolbox: Toolbox) -> list[str]:
        """Lines added under the routing table at start (e.g. tool aliases, tokenizer, sandbox)."""
        ...


class BaseSuite:
    """Defaults for the optional parts of a suite; suites derive from it."""

    name = "suite"
    default_dataset: str | None = None
    calls_per_task = 1
    options: tuple[SuiteOption, ...] = ()
    template_files: Mapping[str, str] = {}
    template_fields: Mapping[str, tuple[str, ...]] = {}  # placeholders each template must contain
    summary_fields: tuple[str, ...] = ()
    dataset_example: str = ""  # one line of the dataset it reads, as its bad-input errors quote it

    def load(self, path: Path, *, dedupe: bool) -> list[Sample]:
        return load_dataset(path, dedupe=dedupe)

    def units(self, samples: list[Sample], options: Mapping[str, Any]) -> list[Sample]:
        return samples

    def limits(self, options: Mapping[str, Any]) -> Mapping[str, int]:
        return {}

    def score(self, records: Mapping[TaskId, dict[str, Any]], units: list[Sample]) -> dict[str, Any] | None:
        return None

    def score_lines(self, scores: Mapping[str, Any]) -> list[str]:
        return [f"{key}: {value}" for key, value in scores.items() if not isinstance(value, (dict, list))]

    def headline(self, scores: Mapping[str, Any], records: Mapping[TaskId, dict[str, Any]],
                 units: list[Sample]) -> Headline | None:
        return None

    def routing_notes(self, toolbox: Toolbox) -> list[str]:
        return []


def templates_of(options: Mapping[str, Any]) -> Mapping[str, Template]:
    """The loaded templates a suite's `prepare` received."""
    templates = options.get("templates") or {}
    return templates if isinstance(templates, Mapping) else {}


def unit_counts(records: Mapping[TaskId, dict[str, Any]], units: list[Sample]) -> dict[str, Any]:
    """How many units of the dataset finished ok, failed (by error type) or have no result yet."""
    failed = Counter(str(r.get("error_type", "unknown")) for r in records.values() if r.get("status") != "ok")
    ok = sum(1 for r in records.values() if r.get("status") == "ok")
    missing = sum(1 for unit in units if sample_id(unit) not in records)
    return {"units": len(units), "ok": ok, "failed": sum(failed.values()),
            "failed_by_type": dict(sorted(failed.items())), "missing": missing}
