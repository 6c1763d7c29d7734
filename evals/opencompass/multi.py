"""The opencompass suite: several OpenCompass-scored suites (gsm8k, mmlu, …) in one run, one run dir.

`ops eval opencompass --datasets gsm8k,mmlu --model base --model ft` (and `ops posttrain`) runs every
sample of every named suite on every model, side by side, as one set of units, so the fleet is kept
busy across datasets and one results.jsonl, profile.jsonl and manifest cover the whole run. Any suite
registered in evals/registry.py under `opencompass.*` is a valid name: a suite added there works
here without more code.

Each member suite is the suite `ops eval NAME` runs, prepared with its own options (its defaults,
with --temperature, --max-tokens, --reasoning, --sample and --seed passed on where it declares them)
and its own templates (`--template NAME.TEMPLATE=PATH`, e.g. `gsm8k.question=…`). Unit ids are
`NAME:ID` (the member's id) so members never collide (mmlu and cmmlu share subject names).

Datasets: `--dataset ROOT` holds one folder per suite (`ROOT/gsm8k`, `ROOT/mmlu`, OpenCompass's data
folder layout where the names agree); `--dataset-dir NAME=PATH` points one suite elsewhere; by
default each suite reads its bundled synthetic set.

Scores: each member scores its own units exactly as `ops eval NAME` would (scores.json `suites`),
OpenCompass's predictions/ and results/ of every dataset land in the one run dir, and
summary/summary.csv holds every member's rows, in --datasets order. `headline` is the one number per
suite a gate acts on: the suite's group of the same name (mmlu: the naive mean over subjects), else
its only dataset (gsm8k), else the naive mean over its datasets; each other model minus the first
with its paired 95 % interval: a paired bootstrap over all the headline's samples, each weighted as
the headline weighs it (paired.weighted_bootstrap; the per-dataset rows of each member keep the
normal approximation of paired.paired).
"""

from __future__ import annotations

import contextlib
import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestra_ops.evals.bundled import packaged
from orchestra_ops.evals.opencompass import outputs
from orchestra_ops.evals.opencompass.headline import headline_row, run_headline
from orchestra_ops.evals.opencompass.suite import THINK_TAG, OpenCompassSuite

from orchestra_ops.client.routing import Routing
from orchestra_ops.core.headline import Headline
from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.dataset import Sample, sample_id
from orchestra_ops.runner.results import TaskId
from orchestra_ops.runner.suite import BaseSuite, SuiteOption, templates_of, unit_counts
from orchestra_ops.runner.templates import Template
from orchestra_ops.runner.toolbox import Toolbox

SEPARATOR = ":"
DATA_ROOT = packaged("opencompass/data")
SHARED = ("temperature", "reasoning", "sample", "seed", "max_tokens")  # passed on to members that declare them


def opencompass_suites() -> list[str]:
    """Every registered suite that OpenCompass scores (registry entries under `opencompass.`, this one aside)."""
    from orchestra_ops.evals.registry import SUITES

    this_module = __name__.removeprefix("orchestra_ops.evals.")
    return [name for name, where in SUITES.items()
            if where.startswith("opencompass.") and where.split(":")[0] != this_module]


def load_member(name: str) -> OpenCompassSuite:
    from orchestra_ops.evals.registry import load_suite

    suite = load_suite(name)
    if not isinstance(suite, OpenCompassSuite):
        raise ConfigError(f"suite '{name}' is not OpenCompass-scored")
    return suite


def parse_datasets(text: str | Sequence[str] | None) -> list[str]:
    """`gsm8k,mmlu` (or a list) -> the names, checked against the registry."""
    items = text.split(",") if isinstance(text, str) else list(text or [])
    names = [item.strip() for item in items if item.strip()]
    known = opencompass_suites()
    if not names:
        raise ConfigError(f"--datasets is empty; choose from: {', '.join(known)}")
    for name in names:
        if name not in known:
            raise ConfigError(f"--datasets: unknown dataset '{name}'; OpenCompass-scored suites: {', '.join(known)}")
        if names.count(name) > 1:
            raise ConfigError(f"--datasets: '{name}' is given twice")
    return names


def parse_dataset_dirs(items: Sequence[str] | None) -> dict[str, str]:
    dirs: dict[str, str] = {}
    for item in items or ():
        name, sep, path = str(item).partition("=")
        if not sep or not name.strip() or not path.strip():
            raise ConfigError(f"--dataset-dir {item!r}: expected NAME=PATH (e.g. mmlu=/data/mmlu)")
        dirs[name.strip()] = path.strip()
    return dirs


class OpenCompassMultiSuite(BaseSuite):
    """Several OpenCompass-scored suites in one run: --datasets gsm8k,mmlu,… for every --model side by side."""

    name = "opencompass"
    default_dataset = DATA_ROOT
    summary_fields = ("correct",)
    options = (
        SuiteOption("datasets", "--datasets", "str", "Comma-separated OpenCompass-scored suites, e.g. gsm8k,mmlu.",
                    default="gsm8k,mmlu"),
        SuiteOption("dataset_dirs", "--dataset-dir", "str", "NAME=PATH: that suite's dataset (default: ROOT/NAME "
                    "under --dataset, else its bundled set).", multiple=True),
        SuiteOption("max_tokens", "--max-tokens", "int", "max_tokens of every request (default: each suite's own).",
                    minimum=1, everyday=True),
        SuiteOption("temperature", "--temperature", "float", "Sampling temperature (0: greedy).", default=0.0,
                    minimum=0, everyday=True),
        SuiteOption("reasoning", "--reasoning", "choice", "A reply's reasoning_content: kept before the answer as "
                    f"'reasoning{THINK_TAG}answer' (OpenCompass's default) or dropped.", default="keep",
                    choices=("keep", "drop")),
        SuiteOption("sample", "--sample", "int", "Score a seeded random N samples of each dataset (per subject "
                    "for mmlu).", minimum=1),
        SuiteOption("seed", "--seed", "int", "Seed of --sample.", default=0),
    )

    def __init__(self) -> None:
        self.members: dict[str, OpenCompassSuite] = {}  # the chosen ones, in --datasets order
        self.views: dict[str, dict[str, Any]] = {}
        self.dataset_dirs: dict[str, str] = {}
        self.run_dir: Path | None = None
        self.models: list[str] = []
        available = {name: load_member(name) for name in opencompass_suites()}
        self.template_files: dict[str, str] = {f"{name}.{t}": path for name, suite in available.items()
                                               for t, path in suite.template_files.items()}
        self.template_fields: dict[str, tuple[str, ...]] = {
            f"{name}.{t}": tuple(fields) for name, suite in available.items()
            for t, fields in suite.template_fields.items()}
        self.calls_per_task = max([s.calls_per_task for s in available.values()] or [1])

    # ---- preparing ------------------------------------------------------------------------------

    def prepare(self, routing: Routing, options: Mapping[str, Any]) -> list[str]:
        names = parse_datasets(options.get("datasets"))
        self.dataset_dirs = parse_dataset_dirs(options.get("dataset_dirs"))
        stray = sorted(set(self.dataset_dirs) - set(names))
        if stray:
            raise ConfigError(f"--dataset-dir {stray[0]}=…: '{stray[0]}' is not in --datasets ({', '.join(names)})")
        templates = templates_of(options)
        self.run_dir = Path(options["run_dir"]) if options.get("run_dir") else None
        called: list[str] = []
        for name in names:
            member = load_member(name)
            view = self._member_view(name, member, options, templates)
            for model in member.prepare(routing, view):
                if model not in called:
                    called.append(model)
            self.members[name] = member
            self.views[name] = view
        self.models = next(iter(self.members.values())).models
        return called

    def _member_view(self, name: str, member: OpenCompassSuite, options: Mapping[str, Any],
                     templates: Mapping[str, Template]) -> dict[str, Any]:
        declared = {option.name: option for option in member.options}
        view: dict[str, Any] = {key: option.default for key, option in declared.items()}
        for key in SHARED:
            if key in declared and options.get(key) is not None:
                view[key] = options[key]
        prefix = f"{name}."
        view.update({"model": options.get("model"), "models": list(options.get("models") or []),
                     "run_dir": options.get("run_dir"), "exec_unsafe": options.get("exec_unsafe", False),
                     "templates": {key.removeprefix(prefix): t for key, t in templates.items()
                                   if key.startswith(prefix)}})
        return view

    def load(self, path: Path, *, dedupe: bool) -> list[Sample]:
        samples: list[Sample] = []
        for name, member in self.members.items():
            source = self._source(name, member, path)
            for sample in member.load(source, dedupe=dedupe):
                samples.append({**sample, "id": f"{name}{SEPARATOR}{sample['id']}", "suite": name})
        return samples

    def _source(self, name: str, member: OpenCompassSuite, root: Path) -> Path:
        if name in self.dataset_dirs:
            source = Path(self.dataset_dirs[name]).resolve()
        elif root == Path(DATA_ROOT).resolve() and member.default_dataset:
            source = Path(member.default_dataset)
        else:
            source = root / name
        if not source.exists():
            raise ConfigError(f"{source}: no {name} dataset there (give --dataset-dir {name}=PATH)")
        return source

    def units(self, samples: list[Sample], options: Mapping[str, Any]) -> list[Sample]:
        units: list[Sample] = []
        for name, member in self.members.items():
            own = [_inner(s, name) for s in samples if s.get("suite") == name]
            for unit in member.units(own, self.views[name]):
                units.append({**unit, "id": f"{name}{SEPARATOR}{unit['id']}", "suite": name})
        return units

    def limits(self, options: Mapping[str, Any]) -> Mapping[str, int]:
        caps: dict[str, int] = {}
        for name, member in self.members.items():
            for key, cap in member.limits(self.views[name]).items():
                caps[key] = min(cap, caps.get(key, cap))
        return caps

    def routing_notes(self, toolbox: Toolbox) -> list[str]:
        notes: list[str] = [f"datasets: {', '.join(self.members)}"]
        for member in self.members.values():
            notes += member.routing_notes(toolbox)
        return notes

    # ---- running --------------------------------------------------------------------------------

    async def run(self, unit: Sample, ctx: Any) -> dict[str, Any]:
        name = str(unit["suite"])
        fields = await self.members[name].run(_inner(unit, name), ctx)
        return {"suite": name, **fields}

    # ---- scores ---------------------------------------------------------------------------------

    def score(self, records: Mapping[TaskId, dict[str, Any]], units: list[Sample]) -> dict[str, Any] | None:
        members: dict[str, Any] = {}
        headline: dict[str, Any] = {}
        rows: list[outputs.SummaryRow] = []
        summary = self.run_dir / "summary" / "summary.csv" if self.run_dir else None
        for name, member in self.members.items():
            own_units = [_inner(u, name) for u in units if u.get("suite") == name]
            own = {sample_id(u): records[f"{name}{SEPARATOR}{sample_id(u)}"] for u in own_units
                   if f"{name}{SEPARATOR}{sample_id(u)}" in records}
            if summary is not None:
                with contextlib.suppress(FileNotFoundError):
                    summary.unlink()  # each member writes its own; read back right after
            scores = member.score(own, own_units) or {}
            members[name] = scores
            headline[name] = headline_row(name, member, scores, own, own_units)
            if summary is not None and summary.is_file():
                rows += read_summary_rows(summary)
        scores_out: dict[str, Any] = {
            "suite": self.name, "datasets": list(self.members), "models": self.models,
            "baseline": self.models[0] if self.models else None, "counts": unit_counts(records, units),
            "headline": headline, "suites": members}
        if self.run_dir is not None:
            path = outputs.write_summary(self.run_dir, self.models, rows)
            scores_out["outputs"] = {"summary": str(path), "predictions": str(self.run_dir / "predictions"),
                                     "results": str(self.run_dir / "results")}
        return scores_out

    def headline(self, scores: Mapping[str, Any], records: Mapping[TaskId, dict[str, Any]],
                 units: list[Sample]) -> Headline | None:
        return run_headline(scores.get("headline") or {}, scores.get("suites") or {})

    def score_lines(self, scores: Mapping[str, Any]) -> list[str]:
        lines: list[str] = []
        for name, member in self.members.items():
            if name in scores.get("suites", {}):
                lines += member.score_lines(scores["suites"][name])
        lines += headline_lines(scores)
        return lines


def _inner(unit: Sample, name: str) -> Sample:
    return {**unit, "id": str(unit["id"]).removeprefix(f"{name}{SEPARATOR}")}


def read_summary_rows(path: Path) -> list[outputs.SummaryRow]:
    """The rows of an OpenCompass summary.csv (as outputs.write_summary writes it) back as SummaryRows."""
    with open(path, newline="", encoding="utf-8") as handle:
        table = list(csv.reader(handle))
    if not table:
        return []
    models = table[0][len(outputs.SUMMARY_HEADER):]
    rows = []
    for line in table[1:]:
        values = {m: (None if cell == "-" else float(cell)) for m, cell in zip(models, line[4:], strict=False)}
        rows.append(outputs.SummaryRow(line[0], line[1], line[2], line[3], values))
    return rows


def headline_lines(scores: Mapping[str, Any]) -> list[str]:
    models: list[str] = list(scores.get("models") or [])
    if len(models) < 2:
        return []
    lines = [f"per dataset ({', '.join(f'{m} - {models[0]}' for m in models[1:])}, paired 95% CI):"]
    for name, head in (scores.get("headline") or {}).items():
        parts = []
        for other in models[1:]:
            interval = head["comparisons"].get(other)
            if not interval:
                parts.append(f"{other}: -")
                continue
            ci = interval.get("ci95")
            span = f" [{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else ""
            parts.append(f"{other}: {interval['difference']:+.2f}{span}")
        shown = ", ".join(f"{m} {'-' if head['scores'].get(m) is None else format(head['scores'][m], '.2f')}"
                          for m in models)
        lines.append(f"  {name} ({head['row']}, {head['metric']}): {shown}; {'; '.join(parts)}")
    return lines
