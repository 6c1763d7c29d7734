"""`ops eval-status`: what a run dir holds: done, failed (by error type), missing.

The units are made by the suite the run dir recorded; the caller looks that suite up by name
(`suite_for`, e.g. the registry of evals/) and the runner imports no suite.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestra_ops.core.headline import Headline, stored_headline
from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.dataset import Sample, load_dataset, sample_id
from orchestra_ops.runner.monitor import LIVE_FILE, elapsed_s
from orchestra_ops.runner.results import RESULTS_FILE, ResultsStore
from orchestra_ops.runner.rundir import SCORES_FILE, read_json_object, read_run_info, recorded_dataset

if TYPE_CHECKING:  # the suite comes from the caller; reading a run dir imports no suite machinery
    from orchestra_ops.runner.suite import Suite


@dataclass
class RunStatus:
    run_dir: str
    dataset: str | None
    dataset_size: int | None
    ok: int
    failed: int
    failed_by_type: dict[str, int]
    missing: int | None
    extra: int  # ids in the results that the dataset does not have
    bad_lines: int
    missing_samples: list[Sample] = field(default_factory=list, repr=False)
    headline: Headline | None = None  # each model's score ± its 95 % interval (scores.json)
    elapsed_s: float | None = None  # wall time over every invocation (live.json)

    def to_json(self) -> dict[str, Any]:
        return {"run_dir": self.run_dir, "dataset": self.dataset, "dataset_size": self.dataset_size,
                "ok": self.ok, "failed": self.failed, "failed_by_type": self.failed_by_type,
                "missing": self.missing, "extra": self.extra, "bad_lines": self.bad_lines,
                "headline": None if self.headline is None else self.headline.to_json(), "elapsed_s": self.elapsed_s}


def run_status(run_dir: str | Path, suite_for: Callable[[str], Suite | None] = lambda name: None) -> RunStatus:
    """`suite_for(name)`: the Suite the run dir's run.json names (None: unknown; the dataset is read as JSONL)."""
    root = Path(run_dir)
    info = read_run_info(root)
    if info is None and not (root / RESULTS_FILE).exists():
        raise ConfigError(f"{root}: not a run dir (no run.json, no {RESULTS_FILE})")
    store = ResultsStore(root)
    final = store.final_records()
    failed_by_type = Counter(str(r.get("error_type", "unknown")) for r in final.values() if r.get("status") != "ok")
    ok = sum(1 for r in final.values() if r.get("status") == "ok")
    dataset = recorded_dataset(str(info["dataset"])) if info and info.get("dataset") else None
    samples: list[Sample] | None = None
    if dataset and Path(dataset).exists():  # a file, or a directory a suite reads (mmlu)
        samples = _units(info or {}, Path(dataset), suite_for)
    missing_samples = [s for s in samples if sample_id(s) not in final] if samples is not None else []
    ids = {sample_id(s) for s in samples} if samples is not None else set()
    return RunStatus(run_dir=str(root), dataset=dataset, dataset_size=len(samples) if samples is not None else None,
                     ok=ok, failed=sum(failed_by_type.values()), failed_by_type=dict(failed_by_type.most_common()),
                     missing=len(missing_samples) if samples is not None else None,
                     extra=len(set(final) - ids) if samples is not None else 0, bad_lines=store.bad_lines,
                     missing_samples=missing_samples, headline=stored_headline(read_json_object(root / SCORES_FILE)),
                     elapsed_s=_elapsed(root))


def _elapsed(root: Path) -> float | None:
    live = read_json_object(root / LIVE_FILE) or {}
    return elapsed_s(live, active=live.get("state") in ("running", "stalled"))


def write_samples(path: str | Path, samples: list[Sample]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for sample in samples:
            handle.write(json.dumps(sample, ensure_ascii=False) + "\n")


def _units(info: dict[str, Any], dataset: Path, suite_for: Callable[[str], Suite | None]) -> list[Sample]:
    """The run's units of work, as its suite makes them from the dataset (limit and dedupe as recorded)."""
    dedupe = bool(info.get("dedupe"))
    suite_name = info.get("suite")
    suite = suite_for(suite_name) if isinstance(suite_name, str) else None
    samples = suite.load(dataset, dedupe=dedupe) if suite is not None else load_dataset(dataset, dedupe=dedupe)
    limit = info.get("limit")
    if isinstance(limit, int):
        samples = samples[:limit]
    if suite is None:
        return samples
    models = [str(m) for m in info.get("models") or []]
    recorded = info.get("suite_options")
    options = {**(recorded if isinstance(recorded, dict) else {}), "models": models,
               "model": models[0] if models else None}
    return suite.units(samples, options)
