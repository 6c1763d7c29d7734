"""PNG plots of an analysis: per metric a linear- and a log-binned histogram, plus the timeline.

matplotlib (the `[analysis]` extra) is imported here only, inside `draw_all`, with the Agg backend
and without pyplot (no global figure state, no display). The bars are drawn from the histograms in
stats.json, so a plot and the numbers next to it cannot disagree. As the users' analyser: y is the
% of values, each bar is labelled with its %, and the title gives n, mean, median, p90 (and the
bin width for linear bins).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestra_ops.errors import OpsError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from orchestra_ops.analysis.outcome import Metric

PLOT_DIR = "plots"
DPI = 100


class PlotsUnavailable(OpsError):
    """matplotlib is not installed: stats.json and report.html are written without plots."""


def draw_all(stats: dict[str, Any], metrics: Sequence[Metric], out_dir: Path) -> dict[str, dict[str, str]]:
    """Draw every plot into out_dir/plots; return {metric key: {scale: path relative to out_dir}}."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotsUnavailable("no plots: matplotlib is not installed (pip install 'orchestra-ops[analysis]')") \
            from None
    folder = out_dir / PLOT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    drawn: dict[str, dict[str, str]] = {}
    for metric in metrics:
        entry = stats["histograms"][metric.key]
        for scale in ("linear", "log"):
            hist = entry[scale]
            if hist is None:
                continue
            name = f"{PLOT_DIR}/{metric.key}_{scale}.png"
            _histogram(Figure(figsize=(7, 4)), hist, metric, stats, scale).savefig(out_dir / name, dpi=DPI)
            drawn.setdefault(metric.key, {})[scale] = name
    line = stats.get("timeline")
    if line:
        name = f"{PLOT_DIR}/timeline.png"
        _timeline(Figure(figsize=(9, 5)), line).savefig(out_dir / name, dpi=DPI)
        drawn["timeline"] = {"timeline": name}
    return drawn


def _histogram(figure: Figure, hist: dict[str, Any], metric: Metric, stats: dict[str, Any], scale: str) -> Figure:
    from orchestra_ops.core.stats import summarize

    edges, percent = hist["edges"], hist["percent"]
    widths = [b - a for a, b in itertools.pairwise(edges)]
    ax = figure.add_subplot()
    bars = ax.bar(edges[:-1], percent, width=widths, align="edge", edgecolor="black", color="#4c72b0")
    for bar, value in zip(bars, percent, strict=False):
        if value > 0:
            ax.annotate(f"{value:.1f}%", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center", va="bottom", fontsize=7)
    if scale == "log":
        ax.set_xscale("log")
    summary = summarize(metric.values)
    unit = metric.unit
    title = (f"{metric.title}: n={summary['count']} mean={summary['mean']:.3g}{unit} "
             f"p50={summary['p50']:.3g}{unit} p90={summary['p90']:.3g}{unit}")
    if scale == "linear":
        title += f" (bin {widths[0]:.3g}{unit})"
    else:
        title += " (log bins)"
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(f"{metric.title} ({unit})")
    ax.set_ylabel("% of values")
    ax.set_ylim(0, max(percent) * 1.15 if max(percent) > 0 else 1)
    figure.subplots_adjust(left=0.09, right=0.98, bottom=0.13, top=0.91)  # fixed: tight_layout costs 0.2 s a plot
    return figure


def _timeline(figure: Figure, line: dict[str, Any]) -> Figure:
    t = line["t"]
    top, bottom = figure.subplots(2, 1, sharex=True)
    top.plot(t, line["calls_per_s"], label="model calls finished / s", color="#4c72b0")
    if line.get("tasks_per_s"):
        top.plot(t, line["tasks_per_s"], label="tasks finished / s", color="#55a868")
    top.set_ylabel("per second")
    top.legend(fontsize=8)
    top.set_title(f"throughput and in-flight over the run (bucket {line['bucket_s']:.3g} s)", fontsize=9)
    bottom.plot(t, line["calls_in_flight"], label="model calls in flight", color="#dd8452")
    if line.get("tasks_in_flight"):
        bottom.plot(t, line["tasks_in_flight"], label="tasks in flight", color="#55a868")
    bottom.set_ylabel("in flight (mean)")
    bottom.set_xlabel("seconds since the first call")
    bottom.legend(fontsize=8)
    figure.subplots_adjust(left=0.08, right=0.98, bottom=0.1, top=0.94, hspace=0.12)
    return figure
