"""`analysis/report.html`: one self-contained page (plots embedded as data: URIs, CSS inline, no
script, nothing fetched). It leads with the result: each model's score ± its 95 % interval (and the
difference when several ran; never a number pooled across models), n, wall time, calls, tokens, cost;
then where the task time went (per role and tool), tokens and cost per role, tasks and errors, one plot
per metric (the linear histogram; the log-binned one stays in analysis/plots/), and, folded under details,
every raw key of scores.json, the latency tables, tokens, throughput, the routing and the manifest.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestra_ops.analysis.report_head import headline_section, time_section
from orchestra_ops.client.pricing import format_usd
from orchestra_ops.core.fsutil import atomic_write_text
from orchestra_ops.core.stats import PERCENTILES
from orchestra_ops.runner.manifest import manifest_of

if TYPE_CHECKING:
    from orchestra_ops.analysis.outcome import Analysis

REPORT_FILE = "report.html"
LATENCY_COLUMNS = ["count", "mean", "std", "min", "max", *(f"p{p}" for p in PERCENTILES), "under_5s"]

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1200px;
color:#1d1d1f;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em} h2{margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:.2em}
h3{margin-bottom:.3em} .meta{color:#666;font-size:.9em}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.88em}
th,td{border:1px solid #d0d0d0;padding:.25em .6em;text-align:right}
th:first-child,td:first-child{text-align:left} thead th{background:#f2f2f5}
.plots{display:flex;flex-wrap:wrap;gap:1em} figure{margin:0;border:1px solid #e0e0e0;padding:.4em}
figure img{display:block;max-width:560px;height:auto} figcaption{font-size:.8em;color:#555}
pre{background:#f7f7f9;border:1px solid #e0e0e0;padding:.8em;overflow-x:auto;font-size:.82em}
.none{color:#888;font-style:italic}
"""


def write_report(analysis: Analysis) -> Path:
    path = analysis.out_dir / REPORT_FILE
    atomic_write_text(path, render(analysis))
    return path


def render(analysis: Analysis) -> str:
    stats = analysis.stats
    run_json = stats.get("run_json") or {}
    manifest = manifest_of(run_json) or {}
    suite = run_json.get("suite") or manifest.get("suite") or "run"
    title = f"{suite} · {analysis.run_dir.name} · orchestra-ops report"
    several = len(run_json.get("models") or []) > 1
    parts = [f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{_e(title)}</title>"
             f"<style>{CSS}</style></head><body>",
             f"<h1>{_e(title)}</h1>",
             f"<p class=\"meta\">run dir {_e(str(analysis.run_dir))} · analysed {_e(stats['generated'])}</p>",
             headline_section(stats), time_section(stats), _usage(stats), _tasks(stats), _plots(analysis),
             "<details id=\"details\"><summary>Details: every key of scores.json, latency tables, tokens, "
             "throughput, routing, manifest</summary>",
             _scores(stats, pooled=not several), _latency(stats), _tokens(stats), _throughput(stats),
             _routing(manifest),
             "<h2 id=\"manifest\">Manifest (run.json)</h2>",
             f"<pre id=\"run-json\">{_e(json.dumps(run_json, indent=2, default=str))}</pre>" if run_json
             else "<p class=\"none\">no run.json in this run dir</p>",
             "</details>", "</body></html>\n"]
    return "\n".join(parts)


DEGRADED_NOTE = "searches no retrieval service answered: the rounds went on without documents (degraded)"


def _scores(stats: Mapping[str, Any], *, pooled: bool = True) -> str:
    """Every key of scores.json; the score recomputed from results.jsonl only where one model ran (with several,
    it would pool them)."""
    rows: list[list[Any]] = []
    recomputed = stats["scores"]["recomputed"]
    if pooled:
        rows.append([f"{recomputed['metric']} (from results.jsonl)", _num(recomputed["value"]),
                     f"{recomputed['graded']} graded, {recomputed['ungraded']} ungraded"])
    for key, value in _flatten(stats["scores"].get("suite") or {}):
        note = DEGRADED_NOTE if key.startswith("retrieval_degraded") and value else ""
        rows.append([f"{key} (scores.json)", _num(value), note])
    return "<h2 id=\"scores\">Scores (every key)</h2>" + table(["score", "value", "note"], rows,
                                                                table_id="score-table")


def _tasks(stats: Mapping[str, Any]) -> str:
    tasks = stats["tasks"]
    calls = stats["calls"]
    out = ["<h2 id=\"tasks\">Tasks and errors</h2>",
           table(["", "count"], [["finished", tasks["finished"]], ["ok", tasks["ok"]], ["failed", tasks["failed"]],
                                 ["executions (with reruns)", tasks["executions"]],
                                 ["model calls", calls["model_calls"]],
                                 ["answered from the response cache", calls.get("cache_hits", 0)],
                                 ["tool calls", calls["tool_calls"]]]),
           "<h3>Task errors by type</h3>",
           table(["error type", "tasks"], tasks["errors_by_type"].items(), table_id="task-errors"),
           "<h3>Call errors by type</h3>",
           table(["error type", "calls"], calls["errors_by_type"].items(), table_id="call-errors"),
           "<h3>Slowest tasks</h3>",
           table(["id", "elapsed (s)", "status", "error"],
                 [[t["id"], _num(t["elapsed"]), t["status"], t.get("error_type", "")] for t in tasks["slowest"]],
                 table_id="slowest")]
    return "\n".join(out)


def latency_rows(groups: Mapping[str, Mapping[str, Any]]) -> list[list[Any]]:
    return [[name, *(_cell(column, row.get(column)) for column in LATENCY_COLUMNS), row.get("errors", "")]
            for name, row in groups.items()]


def _latency(stats: Mapping[str, Any]) -> str:
    header = ["", *LATENCY_COLUMNS[:-1], "<5s", "errors"]
    out = ["<h2 id=\"latency\">Latency (seconds)</h2>", "<h3>Tasks, end to end</h3>",
           table(header, latency_rows({"tasks": stats["tasks"]["latency"]}), table_id="latency-tasks")]
    for key, label in (("by_role", "Model calls per role"), ("by_model", "Model calls per model")):
        out += [f"<h3>{label}</h3>", table(header, latency_rows(stats[key]), table_id=f"latency-{key}")]
    for kind, label in (("e2e", "Tools, end to end"), ("expert", "Tools, the expert call alone")):
        out += [f"<h3>{label}</h3>",
                table(header, latency_rows(stats["by_tool"][kind]), table_id=f"latency-tool-{kind}")]
    for tool, parts in stats["tool_parts"].items():
        out += [f"<h3>Tool '{_e(tool)}': its parts</h3>", table(header, latency_rows(parts))]
    return "\n".join(out)


def _tokens(stats: Mapping[str, Any]) -> str:
    rows = [[f"{kind} {name}", row["prompt_tokens"]["sum"], _num(row["prompt_tokens"]["mean"]),
             row["completion_tokens"]["sum"], _num(row["completion_tokens"]["mean"])]
            for kind, key in (("role", "by_role"), ("model", "by_model")) for name, row in stats[key].items()]
    return "<h2 id=\"tokens\">Tokens</h2>" + table(
        ["", "prompt (sum)", "prompt (mean)", "completion (sum)", "completion (mean)"], rows, table_id="tokens")


def _usage(stats: Mapping[str, Any]) -> str:
    """Tokens and cost per role over every attempt; what the response cache answered, apart (free)."""
    usage = stats.get("usage") or {}
    rows = dict(usage.get("by_role") or {})
    if len(rows) > 1:
        rows["(all)"] = usage["total"]
    body = [[name, row["calls"], row["prompt_tokens"], row["completion_tokens"],
             "not priced" if row["cost_usd"] is None else format_usd(row["cost_usd"]), row["cache_hits"],
             row["cache_hit_prompt_tokens"], row["cache_hit_completion_tokens"]] for name, row in rows.items()]
    return "<h2 id=\"usage\">Tokens and cost per role</h2>" + table(
        ["role", "model calls", "prompt tokens", "completion tokens", "cost (USD)", "cache hits (free)",
         "cache-hit prompt tokens", "cache-hit completion tokens"], body, table_id="usage-table")


def _throughput(stats: Mapping[str, Any]) -> str:
    t = stats["throughput"]
    rows = [["busy time (s)", _num(t["busy_s"])], ["wall span (s)", _num(t["wall_span_s"])],
            ["model calls / s", _num(t["calls_per_s"])], ["tasks / s", _num(t["tasks_per_s"])]]
    return "<h2 id=\"throughput\">Throughput</h2>" + table(["", "value"], rows, table_id="throughput")


def _plots(analysis: Analysis) -> str:
    out = ["<h2 id=\"plots\">Plots</h2>",
           f"<p class=\"meta\">one histogram per metric (linear bins); the log-binned ones are beside this page in "
           f"{_e(str(analysis.out_dir / 'plots'))}</p>"]
    if analysis.plot_note:
        out.append(f"<p class=\"none\">{_e(analysis.plot_note)}</p>")
    titles = {key: entry["title"] for key, entry in analysis.stats["histograms"].items()}
    titles["timeline"] = "throughput and in-flight over the run"
    figures = []
    for key, files in analysis.plots.items():
        scale = "linear" if "linear" in files else next(iter(files))  # one per metric (log: analysis/plots/)
        name = files[scale]
        data = base64.b64encode((analysis.out_dir / name).read_bytes()).decode("ascii")
        caption = f"{titles.get(key, key)}" + ("" if scale == "timeline" else f" ({scale} bins)")
        figures.append(f"<figure class=\"plot\" data-plot=\"{_e(name)}\"><img alt=\"{_e(caption)}\" "
                       f"src=\"data:image/png;base64,{data}\"><figcaption>{_e(caption)}</figcaption></figure>")
    out.append("<div class=\"plots\">" + "\n".join(figures) + "</div>" if figures else "")
    return "\n".join(out)


def _routing(manifest: Mapping[str, Any]) -> str:
    routing = manifest.get("routing")
    out = ["<h2 id=\"routing\">Routing</h2>"]
    if not isinstance(routing, list) or not routing:
        out.append("<p class=\"none\">no routing table in run.json</p>")
        return "\n".join(out)
    columns = sorted({k for entry in routing if isinstance(entry, dict) for k in entry},
                     key=lambda k: ["role", "target", "kind", "served_name", "replicas", "where"].index(k)
                     if k in ("role", "target", "kind", "served_name", "replicas", "where") else 99)
    out.append(table(columns, [[entry.get(c, "") for c in columns] for entry in routing if isinstance(entry, dict)],
                     table_id="routing-table"))
    return "\n".join(out)


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], *, table_id: str | None = None) -> str:
    body = [list(r) for r in rows]
    if not body:
        return "<p class=\"none\">none</p>"
    attr = f" id=\"{table_id}\"" if table_id else ""
    head = "".join(f"<th>{_e(str(h))}</th>" for h in header)
    lines = "\n".join("<tr>" + "".join(f"<td>{_e(_text(c))}</td>" for c in row) + "</tr>" for row in body)
    return f"<table{attr}><thead><tr>{head}</tr></thead><tbody>\n{lines}\n</tbody></table>"


def _flatten(data: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _flatten(value, f"{name}.")
        elif isinstance(value, (int, float, str, bool)) or value is None:
            yield name, value
        else:
            yield name, json.dumps(value, default=str)[:200]


def _cell(column: str, value: Any) -> str:
    if value is None:
        return "-"
    if column == "count":
        return str(value)
    if column == "under_5s":
        return f"{100 * value:.1f}%"
    return f"{value:.3f}"


def _num(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return "-" if value is None else str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _e(text: str) -> str:
    return html.escape(text, quote=True)
