"""`ops compare RUN_A RUN_B`: equivalence of two runs, their score difference, their latency deltas."""

from __future__ import annotations

import click

from orchestra_ops.cli.render import echo_json, stderr_console, wide_option


@click.command()
@click.argument("run_a", type=click.Path(file_okay=False))
@click.argument("run_b", type=click.Path(file_okay=False))
@click.option("--require-equivalent", is_flag=True,
              help="Exit 1 when the runs did not do the same work (ids, dataset, prompts, judge).")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option("--resamples", type=click.IntRange(min=100), default=2000, show_default=True,
              help="Bootstrap resamples for the score interval.")
@click.option("--seed", type=int, default=0, show_default=True, help="Bootstrap seed (same seed, same interval).")
@wide_option
def compare(run_a: str, run_b: str, require_equivalent: bool, as_json: bool, resamples: int, seed: int) -> None:
    """Did RUN_A and RUN_B do the same work? Then B − A: score (paired 95% interval, McNemar) and latency.

    Equivalent means: same suite and options, same dataset file and ids, same prompt templates
    (sha256), same judge, and results for the same ids. Every difference is named.
    """
    from orchestra_ops.analysis.compare import compare_runs  # keeps `ops --help` light

    result = compare_runs(run_a, run_b, resamples=resamples, seed=seed).to_json()
    if as_json:
        echo_json(result)
    else:
        from orchestra_ops.cli.analysis_tables import print_comparison

        print_comparison(result)
    if require_equivalent and not result["equivalent"]:
        items = ", ".join(sorted({d["item"] for d in result["differences"]}))
        stderr_console().print(f"error: the runs are not equivalent ({items})", highlight=False)
        click.get_current_context().exit(1)
