"""Rendering helpers for commands: rich tables that fit the terminal for people, JSON for scripts.

A table fits the width it is printed at (the terminal's; `COLUMNS` when set, also when piped; no limit when
piped without it; `--wide` never limits): columns with nothing in them are dropped, paths are shown relative
to the working directory, and no name, number or path is ever broken across lines. Where it still does not
fit, a long path keeps its tail (`…/logs/answer-0.log`), then the columns a command marks optional are
hidden, then columns from the right (each named under the table); only a single token wider than the
terminal itself is cut with `…`. The cells of a `whole` column keep each of their lines whole (a score and its
interval: `answer 70.0% ± 20.1`).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, TypeVar

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

EMPTY = ("", "-")  # a column whose every cell is one of these says nothing: it is dropped
COLUMN_OVERHEAD = 3  # rich's default box: a space each side of the cell and one rule between cells
PATH_FLOOR = 12  # a path is never shortened below this many characters (nor below its file name)
TOKEN_FLOOR = 6  # the last resort never cuts a token below this
WIDE_ENV = "OPS_WIDE"  # set by --wide for the whole command

F = TypeVar("F", bound=Callable[..., Any])


def echo_json(data: Any) -> None:
    """Print `data` as indented JSON on stdout (the `--json` output of every status command)."""
    click.echo(json.dumps(data, indent=2, sort_keys=False))


def _set_wide(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        os.environ[WIDE_ENV] = "1"


def wide_option(command: F) -> F:
    """`--wide` on a command that prints tables: every column at full width, nothing shortened."""
    option = click.option("--wide", is_flag=True, expose_value=False, callback=_set_wide, is_eager=True,
                          help="Tables at full width: every column, no path shortened (default: fit the terminal).")
    return option(command)


def output_width(stream: TextIO) -> int | None:
    """The width tables fit on `stream`: `COLUMNS` when set, else the terminal's; None: no limit (piped, --wide)."""
    if os.environ.get(WIDE_ENV):
        return None
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        if stream.isatty():
            return shutil.get_terminal_size().columns
    except (AttributeError, ValueError, OSError):  # a closed or odd stream: no limit
        pass
    return None


@dataclass(frozen=True)
class FittedTable:
    columns: list[str]
    rows: list[list[str]]
    widths: list[int]
    hidden: list[str]  # optional columns hidden so the rest fits


def fit_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], width: int | None,
              optional: Sequence[str] = (), whole: Sequence[str] = ()) -> FittedTable:
    """The columns, cells and column widths of a table printed at `width` (None: natural widths)."""
    cells = [["" if cell is None else str(cell) for cell in row] for row in rows]
    names = list(columns)
    if cells:  # drop the columns with nothing to say
        keep = [i for i in range(len(names)) if any(row[i] not in EMPTY for row in cells)]
        names, cells = [names[i] for i in keep], [[row[i] for i in keep] for row in cells]
    if width is None:
        return FittedTable(names, cells, _natural(names, cells), [])
    cells = [[_relative_paths(cell) for cell in row] for row in cells]
    hidden: list[str] = []
    if _total(_natural(names, cells)) > width:
        cells = _shorten_paths(names, cells, width, whole)
        # still too wide: hide what the command can do without (in its order), then columns from the right
        for name in [*optional, *reversed(names[1:])]:
            if _total(_minimal(names, cells, whole)) <= width:
                break
            if name in names[1:]:
                index = names.index(name)
                hidden.append(name)
                names = names[:index] + names[index + 1:]
                cells = [row[:index] + row[index + 1:] for row in cells]
        cells = _cut_tokens(names, cells, width, whole)  # only a token wider than the terminal is cut
    return FittedTable(names, cells, _spread(names, cells, width, whole), hidden)


def make_table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]], *,
               optional: Sequence[str] = (), whole: Sequence[str] = (), stream: TextIO | None = None) -> Table:
    """A rich table of strings (None cells shown empty) that fits `stream` (default stdout): `optional` columns
    are hidden first where it does not fit, the lines of `whole` columns never wrap."""
    width = output_width(stream or sys.stdout)
    fitted = fit_table(columns, rows, width, optional, whole)
    caption = None
    if fitted.hidden:
        caption = f"(hidden: {', '.join(fitted.hidden)}; --wide shows them)"
    shown_title = None if title is None else _relative_paths(title)
    table = Table(title=None if shown_title is None else Text(shown_title, style="italic"), caption=caption,
                  show_lines=False, header_style="bold", title_justify="left", caption_justify="left",
                  min_width=min(len(shown_title or ""), width or 10_000))  # a title on one line where it fits
    for name, column_width in zip(fitted.columns, fitted.widths, strict=True):
        table.add_column(Text(name), width=column_width, overflow="fold", no_wrap=name in whole)
    for row in fitted.rows:
        table.add_row(*(Text(cell) for cell in row))
    return table


def table_width(table: Table) -> int:
    widths = [column.width or 0 for column in table.columns]
    return _total(widths)


def stdout_console() -> Console:
    """A console on stdout: the terminal's width (or COLUMNS); when piped without COLUMNS, lines are not wrapped."""
    return Console(width=output_width(sys.stdout) or 10_000)


def print_table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]], *,
                optional: Sequence[str] = (), whole: Sequence[str] = ()) -> None:
    """Print a table on stdout, fitted to its width (see the module's docstring and `make_table`)."""
    table = make_table(title, columns, rows, optional=optional, whole=whole)
    Console(width=output_width(sys.stdout) or max(table_width(table), table.min_width or 0, 20)).print(table)


def stderr_console() -> Console:
    """A console on stderr for progress and warnings, so stdout stays clean for data."""
    return Console(stderr=True, width=output_width(sys.stderr) or 10_000)


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


# ---- fitting ----------------------------------------------------------------------------------------


def _total(widths: Sequence[int]) -> int:
    return sum(widths) + COLUMN_OVERHEAD * len(widths) + 1


def _natural(names: Sequence[str], cells: Sequence[Sequence[str]]) -> list[int]:
    return [max([len(name), *(_line_width(row[i]) for row in cells)]) for i, name in enumerate(names)]


def _line_width(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


def _longest_token(text: str) -> int:
    return max((len(token) for token in text.split()), default=0)


def _minimal(names: Sequence[str], cells: Sequence[Sequence[str]], whole: Sequence[str] = ()) -> list[int]:
    """The narrowest each column can be without breaking a word of its header or a token of its cells (a line of
    a `whole` column)."""
    return [max([_longest_token(name), *((_line_width if name in whole else _longest_token)(row[i]) for row in cells),
                 1]) for i, name in enumerate(names)]


def _spread(names: Sequence[str], cells: Sequence[Sequence[str]], width: int, whole: Sequence[str]) -> list[int]:
    """Column widths: each at least its longest token; the room left goes first to the columns that need least
    to fit on one line (a short header, a number), then to the others."""
    natural, widths = _natural(names, cells), _minimal(names, cells, whole)
    room = width - _total(widths)
    for i in sorted(range(len(widths)), key=lambda i: natural[i] - widths[i]):
        grant = min(room, natural[i] - widths[i])
        if grant > 0:
            widths[i] += grant
            room -= grant
    return widths


def _is_path(token: str) -> bool:
    return "/" in token and (token.startswith(("/", "~", "./", "../", "…/")) or token.count("/") >= 2)


def _map_tokens(text: str, change: Callable[[str], str]) -> str:
    return " ".join(change(token) for token in text.split(" "))


def _relative_paths(text: str) -> str:
    """Absolute paths under the working directory shown relative to it; the home directory as `~`."""
    cwd, home = str(Path.cwd()), str(Path.home())

    def shorter(token: str) -> str:
        if not token.startswith("/"):
            return token
        if token.startswith(cwd + "/"):
            return token[len(cwd) + 1:]
        if home not in ("/", "") and token.startswith(home + "/"):
            return "~" + token[len(home):]
        return token

    return _map_tokens(text, shorter)


def shorten_path(path: str, limit: int) -> str:
    """`path` in at most `limit` characters, keeping its tail: `…/logs/answer-0.log` (never below its name)."""
    if len(path) <= limit:
        return path
    parts = path.split("/")
    kept = parts[-1]
    for part in reversed(parts[:-1]):
        if len(part) + 1 + len(kept) + 2 > limit:
            break
        kept = f"{part}/{kept}"
    return f"…/{kept}"


def _shorten_if_path(limit: int, token: str) -> str:
    return shorten_path(token, limit) if _is_path(token) else token


def _cut(limit: int, token: str) -> str:
    return token if len(token) <= limit else token[: limit - 1] + "…"


def _shorten_paths(names: Sequence[str], cells: list[list[str]], width: int,
                   whole: Sequence[str]) -> list[list[str]]:
    """Shorten the longest path tokens, widest column first, until the table's narrowest layout fits."""
    done: set[int] = {i for i, name in enumerate(names) if name in whole}
    while True:
        minimal = _minimal(names, cells, whole)
        excess = _total(minimal) - width
        candidates = [i for i in range(len(names)) if i not in done and minimal[i] > PATH_FLOOR
                      and any(_is_path(t) and len(t) == minimal[i] for row in cells for t in row[i].split())]
        if excess <= 0 or not candidates:
            return cells
        column = max(candidates, key=lambda i: minimal[i])
        limit = max(PATH_FLOOR, minimal[column] - excess)
        before = [row[column] for row in cells]
        for row in cells:
            row[column] = _map_tokens(row[column], functools.partial(_shorten_if_path, limit))
        if [row[column] for row in cells] == before or limit == PATH_FLOOR:
            done.add(column)


def _cut_tokens(names: Sequence[str], cells: list[list[str]], width: int, whole: Sequence[str]) -> list[list[str]]:
    """The last resort: cut the widest column's longest tokens (`abcdefgh…`) until the narrowest layout fits."""
    for _ in range(len(names) * 8):
        minimal = _minimal(names, cells, whole)
        excess = _total(minimal) - width
        if excess <= 0:
            break
        cuttable = [i for i in range(len(names)) if names[i] not in whole]
        if not cuttable:
            break
        column = max(cuttable, key=lambda i: minimal[i])
        limit = max(TOKEN_FLOOR, minimal[column] - excess, _longest_token(names[column]))
        if limit >= minimal[column]:
            break
        for row in cells:
            row[column] = _map_tokens(row[column], functools.partial(_cut, limit))
    return cells
