"""`ops _supervise` (hidden): the supervisor process that `ops eval --detach` starts (supervisor.py)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import click

from orchestra_ops.runner.tee import LOG_FILE, TeeHandler, TeeLog
from orchestra_ops.supervise.supervisor import Supervisor, SupervisorSettings, check_eval_args


@click.command("_supervise", hidden=True, context_settings={"ignore_unknown_options": True})
@click.option("--run-dir", required=True, type=click.Path(file_okay=False))
@click.option("--mode", type=click.Choice(["tmux", "slurm"]), default="tmux")
@click.option("--max-restarts", type=click.IntRange(min=0), default=5)
@click.option("--backoff", type=click.FloatRange(min=0), default=5.0)
@click.option("--notify")
@click.argument("eval_args", nargs=-1, type=click.UNPROCESSED)
def supervise(run_dir: str, mode: str, max_restarts: int, backoff: float, notify: str | None,
              eval_args: tuple[str, ...]) -> None:
    """Run `ops EVAL_ARGS…` until it finishes; rerun it with --resume after a crash."""
    settings = SupervisorSettings(run_dir=Path(run_dir), eval_args=check_eval_args(eval_args), mode=mode,
                                  max_restarts=max_restarts, backoff_s=backoff, notify=notify)
    tee = TeeLog(Path(run_dir) / LOG_FILE, click.echo)
    logger = logging.getLogger("orchestra_ops")
    handler = TeeHandler(tee)
    logger.addHandler(handler)
    logger.propagate = False  # warnings (a failing --notify) once, in eval.log and on the pane
    try:
        state = Supervisor(settings, tee).run()
    finally:
        logger.removeHandler(handler)
        tee.close()
        _remove_own_tmux_socket()
    raise SystemExit(0 if state in ("finished", "stopped", "restarting") else 1)


def _remove_own_tmux_socket() -> None:
    """The run's own tmux server ends with this, its only pane; tmux leaves the socket file behind."""
    socket = Path(os.environ.get("TMUX", "").split(",")[0])
    if socket.name.startswith("ops-run-"):
        socket.unlink(missing_ok=True)
