"""`ops serve sim|retrieval|gateway`: the servers the plan starts. Heavy imports happen inside each one."""

from __future__ import annotations

import importlib

import click

# subcommand -> "module:attribute" under orchestra_ops.cli
SERVE_COMMANDS: dict[str, str] = {
    "sim": "serve_sim:sim",
    "retrieval": "serve_retrieval:retrieval",
    "gateway": "serve_gateway:gateway",
}


class LazyServeGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SERVE_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in SERVE_COMMANDS:
            return None
        module_name, attr = SERVE_COMMANDS[cmd_name].split(":")
        command: click.Command = getattr(importlib.import_module(f"orchestra_ops.cli.{module_name}"), attr)
        return command


@click.group(cls=LazyServeGroup)
def serve() -> None:
    """Run one server of the fleet in the foreground (what `ops up` starts for you)."""
