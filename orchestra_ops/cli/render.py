"""Rendering helpers for commands: rich tables for people, JSON for scripts."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import click
from rich.console import Console
from rich.table import Table


def echo_json(data: Any) -> None:
    """Print `data` as indented JSON on stdout (the `--json` output of every status command)."""
    click.echo(json.dumps(data, indent=2, sort_keys=False))


def make_table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Table:
    """A rich table of strings (None cells shown empty)."""
    table = Table(title=title, show_lines=False, header_style="bold")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*("" if cell is None else str(cell) for cell in row))
    return table


def stdout_console() -> Console:
    return Console(width=None if sys.stdout.isatty() else 200)


def print_table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Print a rich table on stdout."""
    stdout_console().print(make_table(title, columns, rows))


def stderr_console() -> Console:
    """A console on stderr for progress and warnings, so stdout stays clean for data."""
    return Console(stderr=True, width=None if sys.stderr.isatty() else 200)


def describe_part(role: str, ranks: Sequence[int], stages: Sequence[int], domain: str | None) -> str:
    """`Ray head, stage 0, steps with big`; `DP ranks 0-3`; `-` for a plain server (also `ops health`'s)."""
    words = {"ray-head": ["Ray head"], "ray-worker": ["Ray worker"]}.get(role, [])
    if ranks:
        words.append(f"DP rank {ranks[0]}" if len(ranks) == 1 else f"DP ranks {ranks[0]}-{ranks[-1]}")
    if stages:
        words.append(f"stage {stages[0]}" if len(stages) == 1 else f"stages {stages[0]}-{stages[-1]}")
    if domain:
        words.append(f"steps with {domain}")
    return ", ".join(words) or "-"
