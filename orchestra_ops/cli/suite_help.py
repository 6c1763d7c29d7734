"""`ops eval SUITE --help` in two parts: the options most runs use, then the advanced ones.

Everyday: which model, which data, how many, where the run goes, resume, the generation flags and the
suite's own options it marks `everyday` (runner/suite.py SuiteOption); everything else is listed under
"Advanced options", still with its help.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import click

# the common options of every suite that most runs use, in the order they are shown
EVERYDAY = ("models", "dataset", "limit", "topology", "run_dir", "resume", "retry_failed", "concurrency", "verbose",
            "detach")


class SuiteCommand(click.Command):
    """A suite's command whose help shows the everyday options first and the advanced ones apart."""

    def __init__(self, *args: Any, everyday: Iterable[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.everyday = [*EVERYDAY, *(name for name in everyday if name not in EVERYDAY)]

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        common: dict[str, tuple[str, str]] = {}
        advanced: list[tuple[str, str]] = []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.name in self.everyday or param.name == "help":
                common[str(param.name)] = record
            else:
                advanced.append(record)
        order = [*self.everyday, "help"]
        with formatter.section("Options"):
            formatter.write_dl([common[name] for name in order if name in common])
        if advanced:
            with formatter.section("Advanced options"):
                formatter.write_dl(advanced)


def everyday_options(suite: Any) -> list[str]:
    """The suite's own options it marks everyday (the generation flags among them)."""
    return [option.name for option in getattr(suite, "options", ()) if getattr(option, "everyday", False)]
