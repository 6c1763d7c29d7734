"""`ops export RUN_DIR --format toolorchestra|tau2|mlflow|wandb|inspect`: a run in another tool's terms.

toolorchestra: one {id}.json per task (--out DIR), as ToolOrchestra's eval scripts write them.
tau2: τ²-bench's results file (--out FILE.json) of a tau2 run (orchestra_ops/evals/tau2/export.py).
mlflow: one MLflow run per run dir on a tracking server (--tracking-uri, else $MLFLOW_TRACKING_URI),
idempotent on re-export (orchestra_ops/export/mlflow_export.py).
wandb: an offline W&B run directory under --out (orchestra_ops/export/wandb_export.py).
inspect: an Inspect AI eval log (--out FILE.eval) that `inspect view` opens (orchestra_ops/export/inspect_export.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from orchestra_ops.cli.render import echo_json
from orchestra_ops.errors import ConfigError


@click.command("export")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
@click.option("--format", "fmt", type=click.Choice(["toolorchestra", "tau2", "mlflow", "wandb", "inspect"]),
              default="toolorchestra", show_default=True,
              help="toolorchestra: per-task files (hle, frames); tau2: τ²-bench's results file (a tau2 run); "
                   "mlflow: a run on a tracking server; wandb: an offline W&B run directory; inspect: an "
                   "Inspect AI log (FILE.eval).")
@click.option("--out", type=click.Path(),
              help="Directory to write to (toolorchestra, wandb), or the file (tau2: .json, inspect: .eval).")
@click.option("--overwrite", is_flag=True, help="toolorchestra: write into a directory that already holds files; "
                                              "tau2, inspect: replace the file.")
@click.option("--tracking-uri", help="mlflow: the tracking server (default: $MLFLOW_TRACKING_URI).")
@click.option("--experiment", default="orchestra-ops", show_default=True, help="mlflow: the experiment's name.")
@click.option("--project", default="orchestra-ops", show_default=True, help="wandb: the project's name.")
@click.option("--json", "as_json", is_flag=True, help="mlflow, wandb, inspect: print what was written as JSON.")
def export(run_dir: str, fmt: str, out: str | None, overwrite: bool, tracking_uri: str | None, experiment: str,
           project: str, as_json: bool) -> None:
    """Write a run in another tool's layout or tracking store."""
    if fmt == "mlflow":
        from orchestra_ops.export.mlflow_export import export_mlflow

        uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            raise ConfigError("--format mlflow needs --tracking-uri URI (or $MLFLOW_TRACKING_URI)")
        done = export_mlflow(run_dir, tracking_uri=uri, experiment=experiment)
        if as_json:
            echo_json(done.to_json())
            return
        verb = "created" if done.created else "updated"
        click.echo(f"{verb} MLflow run {done.run_id} in experiment {experiment} ({uri}): {done.params} params, "
                   f"{done.metrics_logged} metric value(s) logged, {done.artifacts} artifact(s)")
        if done.changed_params:
            click.echo(f"note: param(s) changed since the last export (kept as ops.param_changed.* tags): "
                       f"{', '.join(done.changed_params)}")
        return
    if not out:
        wanted = {"tau2": "FILE.json", "inspect": "FILE.eval"}.get(fmt, "DIR")
        raise ConfigError(f"--format {fmt} needs --out {wanted}")
    if fmt == "inspect":
        from orchestra_ops.export.inspect_export import export_inspect

        log = export_inspect(Path(run_dir), Path(out), overwrite=overwrite)
        if as_json:
            echo_json(log.to_json())
            return
        note = f" ({log.errors} errored)" if log.errors else ""
        click.echo(f"wrote {log.samples} sample(s){note} of the {log.suite} run to {log.out}; "
                   f"open it with `inspect view --log-dir {log.out.parent}`")
        return
    if fmt == "tau2":
        from orchestra_ops.evals.tau2.export import export_tau2

        tau2 = export_tau2(Path(run_dir), Path(out), overwrite=overwrite)
        note = f" ({tau2.without_trajectory} without a trajectory file)" if tau2.without_trajectory else ""
        click.echo(f"wrote {tau2.simulations} simulation(s) of {tau2.tasks} task(s) to {tau2.out}{note}")
        return
    if fmt == "wandb":
        from orchestra_ops.export.wandb_export import export_wandb

        written = export_wandb(run_dir, out=out, project=project)
        if as_json:
            echo_json(written.to_json())
            return
        click.echo(f"wrote offline W&B run {written.run_id} to {written.run_dir} ({written.metrics} metrics, "
                   f"{written.files} file(s)); upload it with `wandb sync {written.run_dir}`")
        return
    from orchestra_ops.evals.agent.export import export_run

    summary = export_run(Path(run_dir), Path(out), fmt, overwrite=overwrite)
    note = f" ({summary.without_trajectory} without a trajectory file)" if summary.without_trajectory else ""
    click.echo(f"wrote {summary.written} {summary.suite} task file(s) to {summary.out}{note}")
