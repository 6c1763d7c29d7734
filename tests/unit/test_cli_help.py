"""Help a person can scan: `ops --help` in groups without the internal commands, `--wide` on every command
that prints a table, suite help with the everyday options apart from the advanced ones, and the same
generation flags on every suite."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from orchestra_ops.evals.registry import SUITES

from orchestra_ops.cli import COMMANDS, HELP_SECTIONS, INTERNAL, main
from tests.helpers import run_ops

SEVERAL_ROLES = {"hle", "frames", "healthbench", "tau2"}  # suites that call more than the model under evaluation


def help_text(*args: str) -> str:
    result = CliRunner().invoke(main, [*args, "--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    return result.output


def test_ops_help_groups_the_commands_and_hides_the_internal_ones() -> None:
    text = help_text()
    sections = re.findall(r"^(\w[\w ]*):$", text, re.MULTILINE)
    assert sections == ["Options", "Fleet", "Evaluate", "Runs and results", "Advanced"]
    listed = re.findall(r"^  ([a-z][\w-]*)  ", text, re.MULTILINE)
    assert sorted(listed) == sorted(set(COMMANDS) - INTERNAL)
    assert [name for names in HELP_SECTIONS.values() for name in names] == listed
    assert "_supervise" not in listed and "serve" in HELP_SECTIONS["Advanced"]  # `ops serve gateway` is for users
    assert run_ops(["_supervise", "--help"]).returncode == 0  # hidden, still there for `ops eval --detach`


TABLES = {"health", "status", "plan", "runs", "eval-status", "analyze", "compare", "bench", "posttrain",
          "lora load", "lora unload", "lora list"}


BESIDE_TABLES = {"stop"}  # in a module that prints tables (runs_cmd), printing none itself
TABLE_CALLS = ("print_table(", "make_table(", "print_analysis(", "print_comparison(")


def test_every_command_that_prints_a_table_takes_wide() -> None:
    ctx = click.Context(main)
    commands: dict[str, click.Command] = {}
    for name in COMMANDS:
        command = main.get_command(ctx, name)
        assert command is not None
        if isinstance(command, click.Group) and name != "eval":
            commands.update({f"{name} {sub}": one for sub, one in command.commands.items()})
        else:
            commands[name] = command
    for name, command in commands.items():
        module = Path(importlib.import_module(command.callback.__module__).__file__ or "") if command.callback else None
        prints = module is not None and any(call in module.read_text() for call in TABLE_CALLS)
        assert prints == (name in TABLES or name in BESIDE_TABLES), name
        if name in TABLES:
            assert any(p.name == "wide" for p in command.params), f"ops {name} has no --wide"
    assert "--wide" in help_text()  # and for everything at once: ops --wide COMMAND


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_suite_help_separates_everyday_from_advanced_and_has_the_generation_flags(suite: str) -> None:
    text = help_text("eval", suite)
    options, _, advanced = text.partition("Advanced options:")
    assert advanced, text
    for flag in ("--model", "--dataset", "--limit", "--resume", "--temperature", "--max-tokens"):
        assert re.search(rf"^\s+{flag}\b", options, re.MULTILINE), (suite, flag)
    for flag in ("--dedupe", "--task-timeout", "--model-config", "--cache-file"):
        assert re.search(rf"^\s+{flag}\b", advanced, re.MULTILINE), (suite, flag)
    sampling = re.search(r"^\s+--sampling\b", options, re.MULTILINE) is not None
    assert sampling == (suite in SEVERAL_ROLES), suite
