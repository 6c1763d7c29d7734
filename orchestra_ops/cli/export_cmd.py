"""`ops export RUN_DIR --format toolorchestra --out DIR`: a run's tasks as the original's per-task files."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("export")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
@click.option("--format", "fmt", type=click.Choice(["toolorchestra"]), default="toolorchestra", show_default=True,
              help="toolorchestra: one {id}.json per task, as ToolOrchestra's eval scripts write them.")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Directory to write the files to.")
@click.option("--overwrite", is_flag=True, help="Write into a directory that already holds files.")
def export(run_dir: str, fmt: str, out: str, overwrite: bool) -> None:
    """Write an hle or frames run's tasks in another tool's layout (their analysis scripts read them unchanged)."""
    from orchestra_ops.evals.agent.export import export_run

    summary = export_run(Path(run_dir), Path(out), fmt, overwrite=overwrite)
    note = f" ({summary.without_trajectory} without a trajectory file)" if summary.without_trajectory else ""
    click.echo(f"wrote {summary.written} {summary.suite} task file(s) to {summary.out}{note}")
