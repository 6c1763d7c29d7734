"""`ops health [TOPOLOGY]`: probe every process concurrently; exit 0 only when all are READY."""

from __future__ import annotations

import sys
import time

import click
from rich.table import Table

from orchestra_ops.cli.render import describe_part, echo_json, make_table, stderr_console, stdout_console
from orchestra_ops.fleet.views import HealthReport
from orchestra_ops.fleet.views import health as fleet_health


def _num(value: float | None, fmt: str = "{:.0f}") -> str:
    return "-" if value is None else fmt.format(value)


def _part(report: HealthReport, name: str) -> str:
    layout = report.layouts.get(name, {})
    return describe_part(layout.get("role", "server"), layout.get("ranks", []), layout.get("stages", []),
                         layout.get("domain"))


def _table(report: HealthReport) -> Table:
    parts = {p.name: _part(report, p.name) for p in report.probes}
    shown = any(text != "-" for text in parts.values())  # a column only for fleets with bigger models
    rows = [(p.name, f"{p.host or '?'}:{p.port}", p.state.value, *([parts[p.name]] if shown else []),
             _num(p.latency_ms, "{:.0f} ms"), p.pid, p.model or "-",
             _num(p.running), _num(p.waiting), _num(None if p.kv_cache is None else 100 * p.kv_cache, "{:.0f}%"),
             _num(None if p.prefix_hit_rate is None else 100 * p.prefix_hit_rate, "{:.1f}%"),
             ", ".join(p.adapters) or "-", p.detail) for p in report.probes]
    ready = sum(p.ready for p in report.probes)
    return make_table(f"{report.topology}: {ready}/{len(report.probes)} ready",
                      ["process", "host:port", "state", *(["part"] if shown else []), "latency", "pid", "model",
                       "running", "waiting", "kv", "prefix hit", "adapters", "detail"], rows)


def _node_table(report: HealthReport) -> Table | None:
    """The nodes that have something to say (a slurm job's state, a node that cannot be reached)."""
    notes = [(n.name, n.backend, n.host or "-", n.state or "-", n.problem or "") for n in report.nodes
             if n.state or n.problem]
    return make_table(None, ["node", "backend", "host", "state", "problem"], notes) if notes else None


def _render(report: HealthReport, as_json: bool) -> None:
    if as_json:
        echo_json(report.to_json())
    else:
        console = stdout_console()
        console.print(_table(report))
        notes = _node_table(report)
        if notes is not None:
            console.print(notes)
        if report.gateway is not None:
            console.print(f"gateway: {report.gateway}/v1 (OpenAI base URL for any harness)", highlight=False)


def _watch_live(report: HealthReport, every: float) -> HealthReport:
    """On a terminal: one table redrawn in place every `every` seconds until Ctrl-C; the last report."""
    from rich.console import Group
    from rich.live import Live
    from rich.text import Text

    def view(current: HealthReport) -> Group:
        stamp = time.strftime("%H:%M:%S")
        notes = _node_table(current)
        parts = [_table(current), *([notes] if notes is not None else [])]
        return Group(*parts, Text(f"probed {stamp}; every {every:g} s; Ctrl-C to stop", style="dim"))

    with Live(view(report), console=stdout_console(), auto_refresh=False) as live:
        try:
            while True:
                time.sleep(every)
                report = fleet_health(report.topology)
                live.update(view(report), refresh=True)
        except KeyboardInterrupt:
            return report


@click.command()
@click.argument("topology", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--watch", type=click.FloatRange(min=0.1), metavar="SECONDS",
              help="Probe again every SECONDS until Ctrl-C (on a terminal the table is redrawn in place).")
def health(topology: str | None, as_json: bool, watch: float | None) -> None:
    """Probe every process of TOPOLOGY (default: the most recent one up); exit 0 only when all are READY."""
    console = stderr_console()
    report = fleet_health(topology)
    if report.undeclared_env:
        console.print(f"warning: {', '.join(report.undeclared_env)} set in the environment but not declared "
                      "by any provider of this topology (ops never routes by it; other tools may)", highlight=False)
    if watch and not as_json and sys.stdout.isatty():
        report = _watch_live(report, watch)
        click.get_current_context().exit(0 if report.all_ready else 1)
    try:
        while True:  # once; or with --watch and no terminal (or --json): one table (JSON) per probe
            _render(report, as_json)
            if not watch:
                break
            time.sleep(watch)
            report = fleet_health(report.topology)
    except KeyboardInterrupt:
        pass
    click.get_current_context().exit(0 if report.all_ready else 1)
