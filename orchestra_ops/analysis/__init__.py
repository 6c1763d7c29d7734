"""Run analysis: latency stats, plots, report."""
