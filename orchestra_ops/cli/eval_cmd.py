"""`ops eval SUITE`: a resumable async eval over the fleet, logged to the run dir."""

from __future__ import annotations

import logging

import click

from orchestra_ops.errors import OpsError
from orchestra_ops.runner.tee import TeeHandler


@click.command("eval")
@click.argument("suite")
@click.option("--dataset", type=click.Path(dir_okay=False), help="JSONL dataset (remembered by the run dir).")
@click.option("--run-dir", type=click.Path(file_okay=False), help="Default: runs/<suite>-<topology>/.")
@click.option("--resume", is_flag=True, help="Run only the samples that have no result yet.")
@click.option("--retry-failed", is_flag=True, help="Rerun the samples whose last result is an error.")
@click.option("--dedupe", is_flag=True, help="Keep the first sample of each duplicate id (else: an error).")
@click.option("--concurrency", type=click.IntRange(min=1), default=32, show_default=True, help="Tasks in flight.")
@click.option("--limit", type=click.IntRange(min=0), help="Only the first N samples of the dataset.")
@click.option("--timeout", "timeout", type=click.FloatRange(min=0, min_open=True),
              help="Per-request timeout in seconds (default: the topology's request_timeout_s, else 600).")
@click.option("--task-timeout", type=click.FloatRange(min=0, min_open=True),
              help="Deadline of one task in seconds (default: enough for every attempt of every call).")
@click.option("--max-retries", "attempts", type=click.IntRange(min=1), default=3, show_default=True,
              help="Attempts per model call, the first included (1: never retry).")
@click.option("--model", "model", help="The role or model the suite calls (the chat suite's target).")
@click.option("--topology", help="A topology file, or the name of a topology that is up (default: the latest).")
@click.option("--model-config", type=click.Path(dir_okay=False),
              help="An endpoints file (model_config JSON); its keys are the roles.")
@click.option("--progress-every", type=click.FloatRange(min=0.1), default=5.0, show_default=True,
              help="Seconds between progress lines.")
def eval_(suite: str, dataset: str | None, run_dir: str | None, resume: bool, retry_failed: bool, dedupe: bool,
          concurrency: int, limit: int | None, timeout: float | None, task_timeout: float | None, attempts: int,
          model: str | None, topology: str | None, model_config: str | None, progress_every: float) -> None:
    """Run SUITE (e.g. `chat`) over the fleet; every finished task lands in the run dir's results.jsonl.

    Ctrl-C stops starting tasks and lets those in flight finish (a second Ctrl-C aborts them);
    `--resume` then continues where the run stopped.
    """
    from orchestra_ops.runner.evalrun import EvalOptions, open_tee, prepare, run_eval  # keeps `ops --help` light

    options = EvalOptions(suite=suite, dataset=dataset, run_dir=run_dir, resume=resume, retry_failed=retry_failed,
                          dedupe=dedupe, concurrency=concurrency, limit=limit, request_timeout_s=timeout,
                          task_timeout_s=task_timeout, attempts=attempts, model=model, topology=topology,
                          model_config=model_config, progress_interval_s=progress_every)
    run = prepare(options)
    tee = open_tee(run.run_dir, click.echo)
    logger = logging.getLogger("orchestra_ops")
    handler = TeeHandler(tee)
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False  # the tee shows warnings on the console and in eval.log, once
    try:
        run_eval(run, tee)
    except OpsError as exc:
        tee.file_line(f"error: {exc}")  # the console gets it from the command group
        raise
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
        tee.close()
