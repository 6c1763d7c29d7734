"""What one analysis of a run produced: its stats, the distributions to plot, and the plots drawn.

Written by analyze.py, read by plots.py and report.py (which is why it is a module of its own).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STATS_FILE = "stats.json"


@dataclass
class Metric:
    """One distribution that gets a pair of histograms (linear and log bins)."""

    key: str  # file-name safe: role_orchestrator, tool_search_expert
    title: str
    unit: str
    values: list[float] = field(repr=False)


@dataclass
class Analysis:
    run_dir: Path
    out_dir: Path
    stats: dict[str, Any]
    metrics: list[Metric]
    plots: dict[str, dict[str, str]] = field(default_factory=dict)  # metric key -> scale -> file name
    plot_note: str | None = None  # why there are no plots, when there are none
    report: Path | None = None

    @property
    def stats_path(self) -> Path:
        return self.out_dir / STATS_FILE
