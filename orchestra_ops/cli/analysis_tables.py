"""Rich tables for `ops analyze` and `ops compare` (rendering only; the numbers come from the library)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestra_ops.analysis.report import LATENCY_COLUMNS, latency_rows
from orchestra_ops.analysis.task_scores import BINARY_METRICS
from orchestra_ops.cli.render import print_table
from orchestra_ops.core.headline import format_difference, format_score, stored_headline

LATENCY_HEADER = ["", *LATENCY_COLUMNS[:-1], "<5s", "errors"]
COMPARE_OPTIONAL = ("p50 A", "p50 B", "n B", "p90 Δ", "mean A", "mean B")
LATENCY_OPTIONAL = ("p10", "p25", "p95", "std", "min", "<5s", "errors", "max", "p90")  # hidden first where narrow


def fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def print_analysis(stats: Mapping[str, Any]) -> None:
    suite_scores = stats["scores"].get("suite") or {}
    headline = stored_headline(suite_scores)
    if headline is not None:
        print_table(f"result: {headline.metric}", ["", "score (95 % interval)"],
                    headline.rows() or [("", headline.note)], whole=("score (95 % interval)",))
    score_rows = []
    models = (stats.get("run_json") or {}).get("models") or []
    if len(models) <= 1:  # with several models a score recomputed over every result would pool them
        recomputed = stats["scores"]["recomputed"]
        score_rows.append([f"{recomputed['metric']} (results.jsonl)", fmt(recomputed["value"]),
                           f"{recomputed['graded']} graded, {recomputed['ungraded']} ungraded"])
    score_rows += [[f"{k} (scores.json)", fmt(v), ""] for k, v in suite_scores.items()
                   if isinstance(v, (int, float, str)) or v is None]
    print_table("scores", ["score", "value", "note"], score_rows)
    tasks, calls, throughput = stats["tasks"], stats["calls"], stats["throughput"]
    print_table("tasks", ["", "value"], [
        ["finished", tasks["finished"]], ["ok", tasks["ok"]], ["failed", tasks["failed"]],
        ["model calls", calls["model_calls"]], ["tool calls", calls["tool_calls"]],
        ["calls / s (busy time)", fmt(throughput["calls_per_s"])],
        ["tasks / s (busy time)", fmt(throughput["tasks_per_s"])],
        ["busy time (s)", fmt(throughput["busy_s"])]])
    _latency_table("latency (s): tasks, end to end", {"tasks": tasks["latency"]})
    _latency_table("latency (s): model calls per role", stats["by_role"])
    _latency_table("latency (s): model calls per model", stats["by_model"])
    if stats["by_tool"]["e2e"]:
        _latency_table("latency (s): tools, end to end", stats["by_tool"]["e2e"])
    if stats["by_tool"]["expert"]:
        _latency_table("latency (s): tools, the expert call alone", stats["by_tool"]["expert"])
    for tool, parts in stats["tool_parts"].items():
        _latency_table(f"latency (s): tool '{tool}', its parts", parts)
    print_table("tokens", ["", "prompt (sum)", "prompt (mean)", "completion (sum)", "completion (mean)"],
                [[f"{kind} {name}", row["prompt_tokens"]["sum"], fmt(row["prompt_tokens"]["mean"]),
                  row["completion_tokens"]["sum"], fmt(row["completion_tokens"]["mean"])]
                 for kind, key in (("role", "by_role"), ("model", "by_model")) for name, row in stats[key].items()])
    print_placement(stats.get("placement") or {})
    errors = [["task", k, v] for k, v in tasks["errors_by_type"].items()]
    errors += [["call", k, v] for k, v in calls["errors_by_type"].items()]
    if errors:
        print_table("errors by type", ["of", "error type", "count"], errors)
    if tasks["slowest"]:
        print_table("slowest tasks", ["id", "elapsed (s)", "status", "error"],
                    [[t["id"], fmt(t["elapsed"]), t["status"], t.get("error_type", "")] for t in tasks["slowest"]])


def _latency_table(title: str, groups: Mapping[str, Any]) -> None:
    print_table(title, LATENCY_HEADER, latency_rows(groups), optional=LATENCY_OPTIONAL)


def print_placement(placement: Mapping[str, Any]) -> None:
    """Per model: calls per replica, session moves, and the prefix-cache hit rate from the replicas' counters."""
    if not placement:
        return
    rows = []
    notes = []
    for model, row in placement.items():
        calls, cache = row["calls"], row["prefix_cache"]
        rate = "-" if not cache or cache["hit_rate"] is None else f"{100 * cache['hit_rate']:.1f}%"
        tokens = "-" if not cache else f"{cache['hits']:.0f} / {cache['queries']:.0f}"
        reasons = ", ".join(f"{k} {v}" for k, v in row["moves"]["by_reason"].items())
        rows.append([model, row["replicas"], calls["max"], fmt(calls["mean"]), fmt(calls["max_over_mean"], 3),
                     row["moves"]["total"] if not reasons else f"{row['moves']['total']} ({reasons})", rate, tokens])
        notes += [[model, note] for note in (cache or {}).get("notes", [])]
    print_table("placement: calls per replica, session moves, prefix cache (the replicas' own counters)",
                ["model", "replicas", "calls max", "calls mean", "max/mean", "moves", "prefix hit rate",
                 "hit / queried tokens"], rows)
    if notes:
        print_table("prefix-cache counters: notes", ["model", "note"], notes)


def print_comparison(result: Mapping[str, Any]) -> None:
    verdict = "equivalent" if result["equivalent"] else "NOT equivalent"
    rows = [[d["item"], d["detail"]] for d in result["differences"]] or [["(nothing)", "same suite, options, "
                                                                           "dataset, ids, prompts and judge"]]
    print_table(f"A {result['run_a']} vs B {result['run_b']}: {verdict}", ["differs", "how"], rows)
    if result["intended_differences"]:
        print_table("what is compared (differs on purpose)", ["differs", "how"],
                    [[d["item"], d["detail"]] for d in result["intended_differences"]])
    score = result["score"]
    if score is None:
        print_table("score", ["", ""], [["no score difference", result["score_note"]]])
    else:
        interval = score["interval"]
        if score["metric"] in BINARY_METRICS:  # a share: percent, the difference in points (one format everywhere)
            a, b = format_score(100 * score["a"]), format_score(100 * score["b"])
            delta = format_difference(100 * interval["difference"], 100 * interval["low"], 100 * interval["high"])
        else:
            a, b = fmt(score["a"]), fmt(score["b"])
            delta = f"{fmt(interval['difference'])} [{fmt(interval['low'])}, {fmt(interval['high'])}]"
        rows = [["metric", score["metric"]], ["ids graded in both", score["shared_ids"]],
                ["A (shared ids)", a], ["B (shared ids)", b],
                [f"B − A ({100 * interval['confidence']:.0f}% interval, paired bootstrap, {interval['resamples']})",
                 delta]]
        if "mcnemar" in score:
            m = score["mcnemar"]
            rows.append(["McNemar (exact)", f"p = {fmt(m['p_value'])} (A right/B wrong {m['a_right_b_wrong']}, "
                                            f"A wrong/B right {m['a_wrong_b_right']})"])
        print_table("score difference", ["", "value"], rows)
    for line in result.get("cache") or []:
        print_table("response cache", ["note"], [[line]])
    latency = result["latency"]
    if latency:
        print_table("latency (s): A → B", ["group", "name", "n A", "n B", "mean A", "mean B", "Δ mean", "p50 A",
                                           "p50 B", "Δ p50", "p90 Δ", "p99 Δ"],
                    [[r["group"], r["name"], r["count_a"], r["count_b"], fmt(r["mean_a"]), fmt(r["mean_b"]),
                      _delta(r["mean_delta"]), fmt(r["p50_a"]), fmt(r["p50_b"]), _delta(r["p50_delta"]),
                      _delta(r["p90_delta"]), _delta(r["p99_delta"])] for r in latency], optional=COMPARE_OPTIONAL)


def _delta(value: float | None) -> str:
    return "-" if value is None else f"{value:+.3g}"
