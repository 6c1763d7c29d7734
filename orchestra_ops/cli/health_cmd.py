"""`ops health [TOPOLOGY]`: probe every process concurrently; exit 0 only when all are READY."""

from __future__ import annotations

import time

import click

from orchestra_ops.cli.render import echo_json, print_table, stderr_console
from orchestra_ops.fleetinfo import HealthReport
from orchestra_ops.fleetinfo import health as fleet_health


def _num(value: float | None, fmt: str = "{:.0f}") -> str:
    return "-" if value is None else fmt.format(value)


def _render(report: HealthReport, as_json: bool) -> None:
    if as_json:
        echo_json(report.to_json())
        return
    rows = [(p.name, f"{p.host or '?'}:{p.port}", p.state.value, _num(p.latency_ms, "{:.0f} ms"), p.pid, p.model or "-",
             _num(p.running), _num(p.waiting), _num(None if p.kv_cache is None else 100 * p.kv_cache, "{:.0f}%"),
             p.detail) for p in report.probes]
    ready = sum(p.ready for p in report.probes)
    print_table(f"{report.topology}: {ready}/{len(report.probes)} ready",
                ["process", "host:port", "state", "latency", "pid", "model", "running", "waiting", "kv", "detail"],
                rows)
    notes = [(n.name, n.backend, n.host or "-", n.state or "-", n.problem or "") for n in report.nodes
             if n.state or n.problem]
    if notes:
        print_table(None, ["node", "backend", "host", "state", "problem"], notes)


@click.command()
@click.argument("topology", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--watch", type=float, metavar="SECONDS", help="Probe again every SECONDS until Ctrl-C.")
def health(topology: str | None, as_json: bool, watch: float | None) -> None:
    """Probe every process of TOPOLOGY (default: the most recent one up); exit 0 only when all are READY."""
    console = stderr_console()
    report = fleet_health(topology)
    if report.undeclared_env:
        console.print(f"warning: {', '.join(report.undeclared_env)} set in the environment but not declared "
                      "by any provider of this topology (ops never routes by it; other tools may)", highlight=False)
    try:
        while True:
            _render(report, as_json)
            if not watch:
                break
            time.sleep(watch)
            report = fleet_health(report.topology)
    except KeyboardInterrupt:
        pass
    click.get_current_context().exit(0 if report.all_ready else 1)
