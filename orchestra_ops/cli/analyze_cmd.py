"""`ops analyze RUN_DIR`: latency tables, histograms and report.html for a run dir."""

from __future__ import annotations

import click

from orchestra_ops.cli.render import echo_json, stderr_console, wide_option


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--bins", type=click.IntRange(min=1, max=1000), default=10, show_default=True,
              help="Bins per histogram (linear and log-spaced).")
@click.option("--json", "as_json", is_flag=True, help="Print stats.json instead of tables.")
@click.option("--no-plots", is_flag=True, help="Skip the PNG histograms (faster; the report has no plots).")
@wide_option
def analyze(run_dir: str, bins: int, as_json: bool, no_plots: bool) -> None:
    """Per role, model and tool latency stats, histograms and RUN_DIR/analysis/report.html.

    Reads profile.jsonl and results.jsonl; writes analysis/stats.json, analysis/plots/*.png and
    analysis/report.html (one self-contained page).
    """
    from orchestra_ops.analysis.analyze import analyze_run  # keeps `ops --help` light

    result = analyze_run(run_dir, bins=bins, plots=not no_plots)
    if as_json:
        echo_json(result.stats)
        return
    from orchestra_ops.cli.analysis_tables import print_analysis

    print_analysis(result.stats)
    console = stderr_console()
    if result.plot_note:
        console.print(f"note: {result.plot_note}", highlight=False)
    console.print(f"stats: {result.stats_path}", highlight=False)
    console.print(f"report: {result.report}", highlight=False)
