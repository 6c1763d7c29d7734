"""`ops analyze RUN_DIR`: the numbers of a run, written to `RUN_DIR/analysis/stats.json`.

stats.json holds: the scores (the suite's scores.json and the score recomputed from results),
tasks (finished, failed, errors by type, latency, the slowest ids), tokens and cost per role
(`usage`, cache hits apart), model calls per role and per model (latency summary, errors, tokens), placement
per model (calls per replica, session moves, the replicas' prefix-cache hit rate: placement.py), tools end to
end and the expert call alone, each tool's parts, throughput (calls and tasks per second over the busy time),
the timeline, where the task time went (time_share.py), token totals, the wall time (live.json), and one
linear and one log-spaced histogram per metric. `analyze_run` also draws the plots and writes
report.html (see plots.py, report.py).
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from orchestra_ops.analysis.histogram import histogram
from orchestra_ops.analysis.latency import (
    call_errors,
    model_call_rows,
    model_shadowed_by_role,
    tool_part_rows,
    tool_rows,
)
from orchestra_ops.analysis.outcome import Analysis, Metric
from orchestra_ops.analysis.placement import placement
from orchestra_ops.analysis.rundata import ANALYSIS_DIR, RunData, load_run
from orchestra_ops.analysis.task_scores import task_scores
from orchestra_ops.analysis.time_share import time_share
from orchestra_ops.analysis.timeline import busy_seconds, timeline
from orchestra_ops.core.fsutil import atomic_write_text
from orchestra_ops.core.stats import summarize
from orchestra_ops.runner.monitor import LIVE_FILE, elapsed_s
from orchestra_ops.runner.profile_reader import ModelCall
from orchestra_ops.runner.rundir import read_json_object
from orchestra_ops.runner.usage import usage

log = logging.getLogger(__name__)

SLOWEST = 10


def compute(run: RunData, bins: int = 10) -> tuple[dict[str, Any], list[Metric]]:
    profile = run.profile
    calls = [c for c in profile.model_calls if not c.cached]  # a cache hit is no model call: no latency
    cache_hits = len(profile.model_calls) - len(calls)
    metrics = _metrics(run)
    busy = busy_seconds([(c.start, c.end) for c in calls] + [(t.start, t.end) for t in profile.tool_calls])
    span = profile.span
    finished = list(run.final.values())
    failed = [r for r in finished if r.get("status") != "ok"]
    slowest = sorted((r for r in finished if isinstance(r.get("elapsed"), (int, float))),
                     key=lambda r: -float(r["elapsed"]))[:SLOWEST]
    stats: dict[str, Any] = {
        "run_dir": str(run.run_dir),
        "generated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "bins": bins,
        "definitions": {"latency_unit": "s", "std": "population (ddof=0)",
                        "percentiles": "linear interpolation between closest ranks (numpy default)",
                        "under_5s": "share of values < 5 s (0..1)",
                        "latency": "successful calls only; failed calls are counted under errors"},
        "run_json": run.run_json,
        "scores": {"suite": run.scores, "recomputed": task_scores(run.final).to_json()},
        "tasks": {"finished": len(finished), "ok": len(finished) - len(failed), "failed": len(failed),
                  "executions": len(run.records), "unreadable_result_lines": run.bad_result_lines,
                  "errors_by_type": dict(Counter(str(r.get("error_type", "unknown")) for r in failed).most_common()),
                  "latency": summarize(float(r["elapsed"]) for r in finished
                                       if isinstance(r.get("elapsed"), (int, float))),
                  "slowest": [{"id": r["id"], "elapsed": r["elapsed"], "status": r.get("status"),
                               **({"error_type": r["error_type"]} if "error_type" in r else {})} for r in slowest]},
        "calls": {"model_calls": len(calls), "cache_hits": cache_hits, "tool_calls": len(profile.tool_calls),
                  "errors_by_type": call_errors(profile), "unreadable_profile_lines": profile.skipped,
                  "unknown_event_types": profile.unknown_types},
        "usage": usage(profile),  # tokens and cost per role, cache hits apart (analysis/usage.py)
        "by_role": model_call_rows(calls, lambda c: c.role),
        "by_model": model_call_rows(calls, lambda c: c.model),
        "by_tool": {"e2e": tool_rows(profile.tool_calls, expert=False),
                    "expert": tool_rows(profile.tool_calls, expert=True)},
        "tool_parts": tool_part_rows(profile.tool_calls),
        "placement": placement(profile),
        "throughput": {"wall_span_s": (span[1] - span[0]) if span else None, "busy_s": busy,
                       "calls_per_s": len(calls) / busy if busy > 0 else None,
                       "tasks_per_s": len(run.records) / busy if busy > 0 and run.records else None},
        "timeline": timeline(profile),
        "time_share": time_share(profile, run.final),
        "tokens": {"prompt": sum(c.prompt_tokens or 0 for c in calls),
                   "completion": sum(c.completion_tokens or 0 for c in calls)},
        "elapsed_s": elapsed_s(read_json_object(run.run_dir / LIVE_FILE) or {}, active=False),
        "histograms": {m.key: {"title": m.title, "unit": m.unit, "n": len(m.values),
                               "linear": histogram(m.values, bins, "linear"),
                               "log": histogram(m.values, bins, "log")} for m in metrics},
    }
    return stats, metrics


def _metrics(run: RunData) -> list[Metric]:
    calls = [c for c in run.profile.model_calls if not c.cached]
    ok_calls = [c for c in calls if c.ok]
    metrics = [Metric("task_e2e", "task latency (end to end)", "s",
                      [float(r["elapsed"]) for r in run.final.values() if isinstance(r.get("elapsed"), (int, float))])]
    metrics += _group_metrics(ok_calls, "role", lambda c: c.role)
    metrics += _group_metrics(ok_calls, "model", lambda c: c.model, skip=model_shadowed_by_role(calls))
    tools = sorted({c.tool for c in run.profile.tool_calls})
    for tool in tools:
        ok = [c for c in run.profile.tool_calls if c.tool == tool and c.ok]
        metrics.append(Metric(f"tool_{_safe(tool)}_e2e", f"tool '{tool}' end to end", "s", [c.latency for c in ok]))
        expert = [c.expert for c in ok if c.expert is not None]
        if expert:
            metrics.append(Metric(f"tool_{_safe(tool)}_expert", f"tool '{tool}' expert call alone", "s", expert))
    for kind in ("prompt", "completion"):
        values = [float(v) for c in ok_calls if (v := getattr(c, f"{kind}_tokens")) is not None]
        metrics.append(Metric(f"tokens_{kind}", f"{kind} tokens per call", "tokens", values))
    return [m for m in metrics if m.values]


def _group_metrics(calls: list[ModelCall], kind: str, key: Callable[[ModelCall], str],
                   skip: Collection[str] = ()) -> list[Metric]:
    """One latency metric per role (or model); `skip`: names whose calls another metric already shows."""
    groups: dict[str, list[float]] = {}
    for call in calls:
        groups.setdefault(key(call), []).append(call.latency)
    return [Metric(f"{kind}_{_safe(name)}", f"{kind} '{name}'", "s", values)
            for name, values in sorted(groups.items()) if name not in skip]


def _safe(name: str) -> str:
    """A file-name-safe form of a role, model or tool name (`Qwen/Qwen3-32B` -> `Qwen_Qwen3-32B`)."""
    return "".join(ch if ch.isalnum() or ch in "-." else "_" for ch in name).strip("._") or "x"


def analyze_run(run_dir: str | Path, *, bins: int = 10, plots: bool = True, report: bool = True) -> Analysis:
    """Compute, write stats.json, draw the plots (when matplotlib is there) and write report.html."""
    run = load_run(run_dir)
    stats, metrics = compute(run, bins)
    out_dir = run.run_dir / ANALYSIS_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    analysis = Analysis(run.run_dir, out_dir, stats, metrics)
    if plots:
        from orchestra_ops.analysis.plots import PlotsUnavailable, draw_all

        try:
            analysis.plots = draw_all(stats, metrics, out_dir)
        except PlotsUnavailable as exc:
            analysis.plot_note = str(exc)
            log.warning("%s", exc)
    stats["plots"] = analysis.plots
    atomic_write_text(analysis.stats_path, json.dumps(stats, indent=2, default=str) + "\n")
    _readable(analysis.stats_path)
    if report:
        from orchestra_ops.analysis.report import write_report

        analysis.report = _readable(write_report(analysis))
    return analysis


def _readable(path: Path) -> Path:
    """World-readable like the plots (atomic writes start from a private temp file): reports are shared."""
    path.chmod(0o644)
    return path
