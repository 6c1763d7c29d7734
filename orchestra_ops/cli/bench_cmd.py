"""`ops bench ROLE_OR_MODEL`: a capacity test through the same client and pool as `ops eval`."""

from __future__ import annotations

import click

from orchestra_ops.cli.render import echo_json, print_table, wide_option
from orchestra_ops.errors import ConfigError


def _levels(sweep: str | None, concurrency: int) -> list[int]:
    if not sweep:
        return [concurrency]
    try:
        levels = [int(part) for part in sweep.split(",") if part.strip()]
    except ValueError:
        raise ConfigError(f"--sweep '{sweep}': expected comma-separated integers such as 16,64,256") from None
    if not levels or min(levels) < 1:
        raise ConfigError(f"--sweep '{sweep}': expected positive integers")
    return sorted(set(levels))


@click.command()
@click.argument("target")
@click.option("--topology", help="A topology file, or the name of a topology that is up (default: the latest).")
@click.option("--model-config", type=click.Path(dir_okay=False), help="An endpoints file (model_config JSON).")
@click.option("--concurrency", type=click.IntRange(min=1), default=64, show_default=True)
@click.option("--requests", type=click.IntRange(min=1), default=1000, show_default=True, help="Requests per level.")
@click.option("--max-tokens", type=click.IntRange(min=1), default=16, show_default=True)
@click.option("--sweep", help="Comma-separated concurrency levels, e.g. 16,64,256 (one row each).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), help="Per-request timeout in seconds.")
@click.option("--max-retries", "attempts", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@wide_option
def bench(target: str, topology: str | None, model_config: str | None, concurrency: int, requests: int,
          max_tokens: int, sweep: str | None, timeout: float | None, attempts: int, as_json: bool) -> None:
    """Measure TARGET (a role or model): req/s, latency p50/p90/p99 and errors by type."""
    # imported here so `ops --help` does not load aiohttp
    from orchestra_ops.client.capacity import knee, run_capacity
    from orchestra_ops.client.event_loop import run
    from orchestra_ops.client.fleet_client import FleetClient
    from orchestra_ops.client.retry import RetryPolicy
    from orchestra_ops.client.sources import load_routing
    from orchestra_ops.runner.limits import check_concurrency, raise_open_file_limit

    levels = _levels(sweep, concurrency)
    routing = load_routing(topology, model_config)
    fleet = FleetClient(routing, retry=RetryPolicy(attempts=attempts), request_timeout_s=timeout)
    soft, hard = raise_open_file_limit()
    check_concurrency(max(levels), fleet.replica_count([target]), soft, hard)
    results = run(run_capacity(fleet, target, levels, requests=requests, max_tokens=max_tokens))
    flat = knee(results) if len(results) > 1 else None
    if as_json:
        echo_json({"target": target, "results": [r.to_json() for r in results], "knee": flat})
        return

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value * 1000:.0f}"

    rows = [(r.concurrency, r.requests, f"{r.req_per_s:.1f}", ms(r.percentile(50)), ms(r.percentile(90)),
             ms(r.percentile(99)), ", ".join(f"{k}: {v}" for k, v in r.errors.items()) or "-") for r in results]
    print_table(f"ops bench {target} ({routing.source})",
                ["concurrency", "requests", "req/s", "p50 ms", "p90 ms", "p99 ms", "errors"], rows)
    if len(results) > 1:
        click.echo(f"throughput stops growing after concurrency {flat}" if flat is not None
                   else "throughput was still growing at the highest concurrency")
