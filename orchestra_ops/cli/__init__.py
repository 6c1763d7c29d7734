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
from orchestra_ops.cli.render import wide_option
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

# `ops --help` in the order a person needs them; a command in no section is listed under Advanced
HELP_SECTIONS: dict[str, tuple[str, ...]] = {
    "Fleet": ("plan", "up", "health", "status", "logs", "restart", "down"),
    "Evaluate": ("eval", "posttrain", "lora"),
    "Runs and results": ("runs", "eval-status", "attach", "stop", "analyze", "compare", "export"),
    "Advanced": ("serve", "bench", "index"),
}
INTERNAL = frozenset({"_supervise"})  # what `ops eval --detach` starts: runnable, not listed


class OpsGroup(click.Group):
    """A group that loads commands on demand and turns OpsError into a message and an exit code."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(COMMANDS))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands in sections (fleet, evaluate, runs and results, advanced); internal ones left out."""
        listed = [name for name in self.list_commands(ctx) if name not in INTERNAL]
        placed = {name for names in HELP_SECTIONS.values() for name in names}
        sections = {title: [n for n in names if n in listed] for title, names in HELP_SECTIONS.items()}
        sections["Advanced"] += [name for name in listed if name not in placed]
        limit = 150  # the whole first sentence: write_dl wraps it under the column, nothing is cut off
        for title, names in sections.items():
            rows = []
            for name in names:
                command = self.get_command(ctx, name)
                if command is not None and not command.hidden:
                    rows.append((name, command.get_short_help_str(limit)))
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)

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
@wide_option
def main(verbose: int) -> None:
    """orchestra-ops: bring up LLM fleets from one topology file and evaluate on them.

    From the repository root, on this machine (simulated engines, a CPU retrieval index):

    \b
      ops plan topologies/local.yaml          validate, print every process it would start
      ops up topologies/local.yaml            launch, wait until serving (again: "already up")
      ops health                              every replica, its state, load and latency
      ops eval gsm8k --limit 20               a suite on its bundled data (--dataset for yours)
      ops eval gsm8k --limit 20 --temperature 0.5 --run-dir runs/gsm8k-t05
      ops runs                                every run: state, score ± 95 % interval, elapsed
      ops compare runs/gsm8k-local runs/gsm8k-t05    same work? what differs, the score difference
      ops analyze runs/gsm8k-local            latency tables, histograms, report.html
      ops down                                stop everything, verify nothing is left

    `ops COMMAND --help` for one command; `ops eval SUITE --help` for a suite's options.
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
