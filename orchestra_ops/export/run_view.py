"""What one ops run dir is, as a tracking tool sees a run: params, metrics and artifacts.

* params: the manifest (run.json) flattened to dotted keys (`suite_options.datasets`,
  `templates.gsm8k.question.sha256`, `ops.version`, …), lists as JSON text; what changes from one
  invocation to the next (the invocation history, the last command line, timestamps) is left out, so
  a resumed run exports the same params.
* metrics: every number in scores.json, flattened to `/`-joined names (`headline/gsm8k/scores/base`),
  then the model-call latency percentiles per model and per role (`latency/model/<name>/p50`, in
  seconds, from the same statistics `ops analyze` writes), and the run's task counts.
* artifacts: report.html and the plots (analysis/), summary/summary.csv and .md, scores.json,
  posttrain.json and run.json, each where it exists.

The identity of a run dir is `run_key`: the sha256 of its resolved path, so exporting it again finds
the same tracking run.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestra_ops.errors import ConfigError

VOLATILE = ("invocations", "cli", "created", "updated")
MAX_PARAM = 6000  # MLflow's limit on a param value
LATENCY_FIELDS = ("mean", "p50", "p90", "p95", "p99", "max")
ARTIFACTS = ("analysis/report.html", "summary/summary.csv", "summary/summary.md", "scores.json", "posttrain.json",
             "run.json")
_NAME = re.compile(r"[^A-Za-z0-9_\-./ ]")


@dataclass
class RunView:
    run_dir: Path
    run_key: str
    name: str
    params: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    artifacts: list[tuple[Path, str]] = field(default_factory=list)  # (file, folder inside the run's artifacts)
    tags: dict[str, str] = field(default_factory=dict)


def run_key(run_dir: Path) -> str:
    return hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:32]


def metric_name(parts: list[str]) -> str:
    return _NAME.sub("_", "/".join(parts))


def _flatten(value: Any, prefix: list[str]) -> Iterator[tuple[list[str], Any]]:
    if isinstance(value, Mapping):
        for key, inner in value.items():
            yield from _flatten(inner, [*prefix, str(key)])
    else:
        yield prefix, value


def params_of(info: Mapping[str, Any]) -> dict[str, str]:
    params: dict[str, str] = {}
    for key, value in info.items():
        if key in VOLATILE:
            continue
        for path, leaf in _flatten(value, [key]):
            text = leaf if isinstance(leaf, str) else json.dumps(leaf, sort_keys=True)
            params[".".join(path)[:250]] = text[:MAX_PARAM]
    return params


def metrics_of(scores: Mapping[str, Any]) -> dict[str, float]:
    metrics: dict[str, float] = {}
    leaves: list[tuple[list[str], Any]] = []
    for path, value in _flatten(scores, []):
        if isinstance(value, list):  # e.g. ci95: [low, high] -> ci95/0, ci95/1
            leaves += [([*path, str(i)], item) for i, item in enumerate(value)]
        else:
            leaves.append((path, value))
    for path, leaf in leaves:
        if isinstance(leaf, bool) or not isinstance(leaf, (int, float)) or not math.isfinite(float(leaf)):
            continue
        metrics[metric_name(path)] = float(leaf)
    return metrics


def latency_metrics(stats: Mapping[str, Any]) -> dict[str, float]:
    metrics: dict[str, float] = {}
    for group in ("by_model", "by_role"):
        for name, row in (stats.get(group) or {}).items():
            for key in (*LATENCY_FIELDS, "count"):
                value = row.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    metrics[metric_name(["latency", group.removeprefix("by_"), name, key])] = float(value)
    tasks = stats.get("tasks") or {}
    for key in ("finished", "ok", "failed"):
        if isinstance(tasks.get(key), int):
            metrics[f"tasks/{key}"] = float(tasks[key])
    calls = stats.get("calls") or {}
    for key in ("model_calls", "cache_hits"):
        if isinstance(calls.get(key), int):
            metrics[f"calls/{key}"] = float(calls[key])
    return metrics


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not readable JSON: {exc}") from None
    return data if isinstance(data, dict) else None


def run_view(run_dir: str | Path) -> RunView:
    """The run dir as params, metrics and artifacts (ConfigError when it is not a run dir)."""
    from orchestra_ops.analysis.analyze import compute
    from orchestra_ops.analysis.rundata import load_run

    root = Path(run_dir)
    info = _read_json(root / "run.json")
    if info is None:
        raise ConfigError(f"{root}: not a run dir (no run.json)")
    view = RunView(root, run_key(root), root.resolve().name)
    view.params = params_of(info)
    view.metrics = metrics_of(_read_json(root / "scores.json") or {})
    stats, _ = compute(load_run(root))
    view.metrics.update(latency_metrics(stats))
    posttrain = _read_json(root / "posttrain.json")
    if posttrain is not None:
        view.tags["ops.verdict"] = str(posttrain.get("verdict"))
    view.tags.update({"ops.run_key": view.run_key, "ops.run_dir": str(root.resolve()),
                      "ops.suite": str(info.get("suite"))})
    for relative in ARTIFACTS:
        if (root / relative).is_file():
            view.artifacts.append((root / relative, str(Path(relative).parent) if "/" in relative else ""))
    for plot in sorted((root / "analysis").rglob("*.png")):
        view.artifacts.append((plot, "analysis/plots"))
    return view
