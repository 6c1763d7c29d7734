"""`ops serve gateway`: start the gateway and serve until SIGTERM, SIGINT or SIGHUP.

    checks  loopback by default; binding anything else while a provider's key would be injected
            needs --api-key-env (clients then prove the token); --api-key-env names a set variable
    log     `runs/gateway-<topology>/profile.jsonl` (one writer: the run dir's lock), one
            `model_call` line per request as the engine writes them, so `ops analyze` reads it
    reload  the endpoints file (and the runtime adapters) are polled; a change re-reads the routing
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path

from orchestra_ops.client.cache import ResponseCache
from orchestra_ops.client.routing import Routing
from orchestra_ops.core import redact
from orchestra_ops.errors import ConfigError, LaunchError, OpsError
from orchestra_ops.gateway.app import Gateway, GatewayOptions
from orchestra_ops.gateway.server import HttpServer
from orchestra_ops.gateway.source import RoutingSource, identities, signature
from orchestra_ops.runner.lock import RunDirBusy, RunDirLock
from orchestra_ops.runner.profile import ProfileWriter
from orchestra_ops.runner.rundir import write_run_info

log = logging.getLogger(__name__)

RELOAD_POLL_S = 1.0
FLUSH_S = 1.0
GATEWAY_KIND = "gateway"  # run.json's "suite" of a gateway run dir (it has no samples)


@dataclass(frozen=True)
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8000
    run_dir: Path | None = None  # default runs/gateway-<topology>
    cache: Path | None = None
    cache_sampled: bool = False
    gateway: GatewayOptions = field(default_factory=GatewayOptions)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(routing: Routing, host: str, api_key_env: str | None) -> None:
    """Refuse a bind that would hand provider keys to anyone who reaches the port (see the module doc)."""
    if api_key_env is not None and not os.environ.get(api_key_env):
        raise ConfigError(f"--api-key-env {api_key_env}: the variable is not set (it holds the token clients send)")
    keyed = sorted(t.name for t in routing.targets.values() if t.kind == "provider" and t.api_key_env)
    if keyed and not is_loopback(host) and api_key_env is None:
        raise ConfigError(f"--host {host} is not loopback and the gateway would inject the keys of provider(s) "
                          f"{', '.join(keyed)}: set --api-key-env VAR (clients then send 'Authorization: Bearer "
                          "$VAR'), or bind 127.0.0.1")


def default_run_dir(routing: Routing) -> Path:
    return Path("runs") / f"gateway-{routing.name}"


async def serve(source: RoutingSource, options: ServeOptions, *, on_ready: asyncio.Event | None = None) -> None:
    routing = source.load()
    check_exposure(routing, options.host, options.gateway.api_key_env)
    secrets = sorted({t.api_key_env for t in routing.targets.values() if t.api_key_env}
                     | ({options.gateway.api_key_env} if options.gateway.api_key_env else set()))
    redact.install(redact.Redactor.from_env(secrets))
    cache = None
    names = None
    if options.cache is not None:
        names = identities(routing, source.topology_of(routing))
        cache = ResponseCache(options.cache, sampled=options.cache_sampled)
    run_dir = options.run_dir or default_run_dir(routing)
    try:
        lock = RunDirLock.acquire(run_dir)
    except RunDirBusy as exc:
        raise ConfigError(f"{run_dir}: another gateway (or eval) writes there ({exc}); pass --run-dir DIR") from None
    profile = ProfileWriter(run_dir)
    write_run_info(run_dir, {"suite": GATEWAY_KIND, "topology": routing.name, "source": routing.source,
                             "gateway": {"host": options.host, "port": options.port,
                                         "cache": str(options.cache) if options.cache else None}})
    gateway = Gateway(routing, options.gateway, on_line=profile.line, cache=cache, identities=names)
    server = HttpServer(gateway.handle)
    try:
        try:
            await server.start(options.host, options.port)
        except OSError as exc:
            raise LaunchError(f"cannot listen on {options.host}:{options.port}: {exc.strerror or exc}") from None
        log.warning("gateway for %s on http://%s:%d (request log %s/profile.jsonl)", routing.source, options.host,
                    options.port, run_dir)
        if on_ready is not None:
            on_ready.set()
        await _until_stopped(source, gateway, profile)
    finally:
        await server.close()
        await gateway.close()
        profile.close()
        if cache is not None:
            cache.close()
        lock.release()


async def _until_stopped(source: RoutingSource, gateway: Gateway, profile: ProfileWriter) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    seen = signature(source.watched(gateway.routing))
    while not stop.is_set():
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), min(RELOAD_POLL_S, FLUSH_S))
        profile.flush()
        now = signature(source.watched(gateway.routing))
        if now != seen:
            seen = now
            try:
                routing = source.load()
                names = identities(routing, source.topology_of(routing)) if gateway.cache is not None else None
            except OpsError as exc:
                log.warning("gateway: the routing changed but cannot be read (%s); keeping the previous one", exc)
                continue
            gateway.reload(routing, names)
            log.warning("gateway: routing re-read from %s (%d targets)", routing.source, len(gateway.pools))
