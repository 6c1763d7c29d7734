"""`ops export RUN_DIR --format toolorchestra|tau2 --out PATH`: a run in another tool's layout."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("export")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
@click.option("--format", "fmt", type=click.Choice(["toolorchestra", "tau2"]), default="toolorchestra",
              show_default=True, help="toolorchestra: one {id}.json per task, as ToolOrchestra's eval scripts write "
              "them (hle, frames); tau2: τ²-bench's results file (a tau2 run).")
@click.option("--out", required=True, type=click.Path(),
              help="Directory to write the files to (toolorchestra), or the JSON file (tau2).")
@click.option("--overwrite", is_flag=True, help="Write into a directory that already holds files (replace the file).")
def export(run_dir: str, fmt: str, out: str, overwrite: bool) -> None:
    """Write a run's tasks in another tool's layout (their analysis scripts read them unchanged)."""
    if fmt == "tau2":
        from orchestra_ops.evals.tau2.export import export_tau2

        done = export_tau2(Path(run_dir), Path(out), overwrite=overwrite)
        note = f" ({done.without_trajectory} without a trajectory file)" if done.without_trajectory else ""
        click.echo(f"wrote {done.simulations} simulation(s) of {done.tasks} task(s) to {done.out}{note}")
        return
    from orchestra_ops.evals.agent.export import export_run

    summary = export_run(Path(run_dir), Path(out), fmt, overwrite=overwrite)
    note = f" ({summary.without_trajectory} without a trajectory file)" if summary.without_trajectory else ""
    click.echo(f"wrote {summary.written} {summary.suite} task file(s) to {summary.out}{note}")
