"""The `ops` command: a thin click layer over the library.

Commands are imported lazily (only the one being run), so `ops --help` stays fast and never
imports torch, faiss, fastapi or matplotlib. Each command module parses, calls the library,
renders, and lets OpsError subclasses reach `OpsGroup.invoke`, which maps them to exit codes.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
from typing import Any

import click

from orchestra_ops import __version__
from orchestra_ops.core.redact import redact
from orchestra_ops.errors import Interrupted, OpsError, TopologyError

# command name -> "module:attribute" (modules under orchestra_ops.cli)
COMMANDS: dict[str, str] = {
    "plan": "plan_cmd:plan",
    "eval": "eval_cmd:eval_",
    "eval-status": "eval_status_cmd:eval_status",
    "analyze": "analyze_cmd:analyze",
    "compare": "compare_cmd:compare",
    "export": "export_cmd:export",
    "bench": "bench_cmd:bench",
    "serve": "serve_cmd:serve",
    "index": "index_cmd:index",
    "up": "up_cmd:up",
    "health": "health_cmd:health",
    "status": "status_cmd:status",
    "logs": "logs_cmd:logs",
    "down": "down_cmd:down",
    "restart": "restart_cmd:restart",
    "lora": "lora_cmd:lora",
    "posttrain": "posttrain_cmd:posttrain",
    "runs": "runs_cmd:runs",
    "attach": "attach_cmd:attach",
    "stop": "runs_cmd:stop",
    "_supervise": "supervise_cmd:supervise",
}


class OpsGroup(click.Group):
    """A group that loads commands on demand and turns OpsError into a message and an exit code."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS:
            module_name, attr = COMMANDS[cmd_name].split(":")
            module = importlib.import_module(f"orchestra_ops.cli.{module_name}")
            command: click.Command = getattr(module, attr)
            return command
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except OpsError as exc:
            with contextlib.suppress(OSError):  # stderr may be gone (a closed terminal): the exit code still tells
                report_error(exc)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(Interrupted.exit_code)


def report_error(exc: OpsError) -> None:
    """Print an OpsError the way every command does: `error: …`, one line per problem."""
    if isinstance(exc, TopologyError):  # compiler style: one FILE:LINE: path: message per line
        for problem in exc.problems:
            click.echo(problem, err=True)
        return
    lines = redact(str(exc)).splitlines() or [type(exc).__name__]
    click.echo(f"error: {lines[0]}", err=True)
    for line in lines[1:]:
        click.echo(f"  {line}" if not line.startswith(" ") else line, err=True)


@click.group(cls=OpsGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ops")
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
def main(verbose: int) -> None:
    """orchestra-ops: bring up LLM fleets from one topology file and evaluate on them.

    \b
      ops plan topologies/hle_oss.yaml   validate, print every process it would start
      ops up topologies/local.yaml       launch, wait until serving, write endpoints
      ops health                         every replica, its state, load and latency
      ops eval chat --resume             resumable async eval with tee logs
      ops analyze runs/chat-local        latency tables, histograms, report.html
      ops compare runs/a runs/b          same work? then the score difference
      ops down                           stop everything, verify nothing is left
    """
    level = logging.WARNING - 10 * verbose
    if os.environ.get("OPS_DEBUG"):
        level = logging.DEBUG
    logging.basicConfig(level=max(level, logging.DEBUG), format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactingFilter())


class RedactingFilter(logging.Filter):
    """Log lines on stderr (asyncio's, aiohttp's, -vv debug) are redacted like everything else ops prints."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True
