"""`ops serve gateway`: one OpenAI-compatible URL over a fleet (orchestra_ops/gateway)."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from orchestra_ops.errors import ConfigError


@click.command("gateway")
@click.option("--topology", help="A topology file, or the name of a topology that is up (default: the latest up).")
@click.option("--model-config", type=click.Path(dir_okay=False),
              help="An endpoints file instead: its keys are then the only model names.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind (anything but loopback needs --api-key-env when provider keys are injected).")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("--api-key-env", metavar="VAR",
              help="Clients must send 'Authorization: Bearer $VAR' (the variable's value, read per request).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True),
              help="Per-request timeout in seconds (default: each model's, else the topology's request_timeout_s).")
@click.option("--max-retries", "attempts", type=click.IntRange(min=1), default=3, show_default=True,
              help="Attempts per request (the first included); never after the first byte reached the client.")
@click.option("--replica-cap", type=click.IntRange(min=1), default=256, show_default=True,
              help="Requests in flight to one replica at once; more wait in the gateway.")
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where the request log (profile.jsonl) goes (default: runs/gateway-<topology>).")
@click.option("--cache", is_flag=True, help="Answer repeated temperature-0 requests from the response cache "
                                            "(needs a topology; default file $OPS_HOME/cache/responses.sqlite).")
@click.option("--cache-file", type=click.Path(dir_okay=False, path_type=Path), help="The cache file (implies --cache).")
@click.option("--cache-sampled", is_flag=True, help="With --cache, cache sampled requests too.")
def gateway(topology: str | None, model_config: str | None, host: str, port: int, api_key_env: str | None,
            timeout: float | None, attempts: int, replica_cap: int, run_dir: Path | None, cache: bool,
            cache_file: Path | None, cache_sampled: bool) -> None:
    """Serve /v1/chat/completions (and completions, embeddings, /tokenize, /detokenize, /v1/models) for
    every role, model, served name and adapter of the fleet: least-loaded replicas with session affinity
    (x-session-id), retries before the first byte only, /metrics, and a request log `ops analyze` reads."""
    from orchestra_ops.client.cache import default_cache_path
    from orchestra_ops.client.event_loop import run
    from orchestra_ops.client.retry import RetryPolicy
    from orchestra_ops.gateway.app import GatewayOptions
    from orchestra_ops.gateway.run import ServeOptions, serve
    from orchestra_ops.gateway.source import RoutingSource
    from orchestra_ops.runner.limits import raise_open_file_limit

    if topology and model_config:
        raise ConfigError("give --topology or --model-config, not both")
    if (cache or cache_file) and model_config:
        raise ConfigError("--cache needs a topology (--topology NAME|FILE): the cache key is what each model name "
                          "stands for, which an endpoints file does not say")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    raise_open_file_limit()
    cache_path = cache_file or (default_cache_path() if cache else None)
    options = ServeOptions(host=host, port=port, run_dir=run_dir, cache=cache_path, cache_sampled=cache_sampled,
                           gateway=GatewayOptions(retry=RetryPolicy(attempts=attempts), request_timeout_s=timeout,
                                                  replica_cap=replica_cap, api_key_env=api_key_env))
    run(serve(RoutingSource(topology=topology, model_config=model_config), options))
