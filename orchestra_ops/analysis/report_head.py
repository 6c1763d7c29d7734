"""The top of report.html: the result (each model's score ± its 95 % interval, the differences, n, wall time,
calls, tokens, cost) and where the task time went (per role and per tool)."""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from orchestra_ops.client.pricing import format_usd
from orchestra_ops.core.headline import cost_of, format_difference, format_score, stored_headline
from orchestra_ops.runner.progress import format_wall


def headline_section(stats: Mapping[str, Any]) -> str:
    """`<h2 id="headline">`: the scores (one row per model, never pooled), the differences, then the facts."""
    scores = stats["scores"].get("suite")
    headline = stored_headline(scores)
    out = ["<h2 id=\"headline\">Result</h2>"]
    if headline is None:
        out.append("<p class=\"none\">no score: scores.json is missing or was written before scores had intervals "
                   "(rerun `ops eval … --resume` to rescore)</p>")
    elif not headline.scores:
        out.append(f"<p id=\"headline-note\">{_e(headline.note or 'no score')}</p>")
    else:
        out.append(_table(["model", f"{headline.metric} (95 % interval)", "n"],
                          [[_label(s.model, s.dataset), format_score(s.score, s.half_width), s.n]
                           for s in headline.scores], "headline-scores"))
        if headline.differences:
            out.append(_table(["difference", "points (paired 95 % interval)", "n"],
                              [[_label(f"{d.model} − {d.baseline}", d.dataset),
                                format_difference(d.difference, d.low, d.high), d.n] for d in headline.differences],
                              "headline-differences"))
    out.append(_table(["", ""], _facts(stats, scores), "headline-facts"))
    return "\n".join(out)


def _facts(stats: Mapping[str, Any], scores: Mapping[str, Any] | None) -> list[list[Any]]:
    tasks, calls, tokens = stats["tasks"], stats["calls"], stats.get("tokens") or {}
    wall = stats.get("elapsed_s")
    if wall is None:
        wall = stats["throughput"].get("wall_span_s")
    prompt, completion = int(tokens.get("prompt") or 0), int(tokens.get("completion") or 0)
    rows: list[list[Any]] = [
        ["n (units)", f"{tasks['finished']} ({tasks['ok']} ok, {tasks['failed']} failed)"],
        ["wall time", "-" if wall is None else format_wall(float(wall))],
        ["model calls", f"{calls['model_calls']:,}" + (f" (+{calls['cache_hits']:,} from the response cache)"
                                                      if calls.get("cache_hits") else "")],
        ["tokens", f"{prompt + completion:,} (prompt {prompt:,}, completion {completion:,})"],
    ]
    cost = cost_of(scores)
    if cost is not None:
        rows.append(["cost", format_usd(cost)])
    return rows


def time_section(stats: Mapping[str, Any]) -> str:
    """`<h2 id="time">`: calls, seconds and share of the task time per role and per tool."""
    share = stats.get("time_share") or {}
    rows = [[f"role {name}", row["calls"], f"{row['seconds']:.1f}", _percent(row["share"])]
            for name, row in (share.get("roles") or {}).items()]
    rows += [[f"tool {name}", row["calls"], f"{row['seconds']:.1f}", _percent(row["share"])]
             for name, row in (share.get("tools") or {}).items()]
    note = (f"<p class=\"meta\">share of the task time ({float(share.get('task_seconds') or 0):.1f} s over every "
            "task, end to end); tasks run side by side and a tool's time holds its expert call, so the shares need "
            "not add up to 100 %</p>")
    return "\n".join(["<h2 id=\"time\">Where the time went</h2>", note,
                      _table(["", "calls", "seconds", "share of task time"], rows, "time-share")])


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _label(name: str, dataset: str | None) -> str:
    return f"{dataset}: {name}" if dataset else name


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]], table_id: str) -> str:
    body = [list(r) for r in rows]
    if not body:
        return "<p class=\"none\">none</p>"
    head = "".join(f"<th>{_e(str(h))}</th>" for h in header)
    lines = "\n".join("<tr>" + "".join(f"<td>{_e(str(c))}</td>" for c in row) + "</tr>" for row in body)
    return f"<table id=\"{table_id}\"><thead><tr>{head}</tr></thead><tbody>\n{lines}\n</tbody></table>"


def _e(text: str) -> str:
    return html.escape(text, quote=True)
