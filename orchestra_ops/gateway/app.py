"""The gateway's routes: inference forwarded by the body's `model`, the rest answered here.

    POST /v1/chat/completions, /v1/completions, /v1/embeddings, /tokenize, /detokenize
         -> one replica of the target `model` names (a role, a model key, a served name or an
            adapter; a provider for the /v1 routes), through its ReplicaPool (forward.py); with
            affinity on, a session's calls to a model of vLLM's internal DP carry its rank in
            X-data-parallel-rank (client/dp_ranks.py), unless the client sent one
    GET  /v1/models   every name a request may use
    GET  /health      200 while the gateway serves (no auth)
    GET  /metrics     Prometheus text (metrics.py)
    anything else     404: admin routes (/v1/load_lora_adapter …) are never forwarded

With `api_key_env`, every route but /health wants `Authorization: Bearer <$VAR>` (compared in
constant time, the variable read per request, never stored). The client's own Authorization never
goes further; a provider gets the key its `api_key_env` names, read when the request is sent.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestra_ops.client.cache import ResponseCache, request_key
from orchestra_ops.client.dp_ranks import RANK_HEADER, rank_headers
from orchestra_ops.client.pool import ReplicaPool
from orchestra_ops.client.replica import Replica
from orchestra_ops.client.retry import RetryPolicy
from orchestra_ops.client.routing import Routing, Target
from orchestra_ops.client.transport import KeepAliveTransport
from orchestra_ops.errors import ConfigError
from orchestra_ops.gateway.body import merge_defaults, session_of
from orchestra_ops.gateway.calllog import call_line
from orchestra_ops.gateway.forward import Call, Forwarded, Forwarder, error_body, json_object
from orchestra_ops.gateway.metrics import GatewayMetrics
from orchestra_ops.gateway.server import Reply, Request
from orchestra_ops.gateway.upstream import Upstreams

log = logging.getLogger(__name__)

INFERENCE_ROUTES = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/tokenize", "/detokenize")
PROVIDER_ROUTES = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings")
LOGGED_ROUTES = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings")
DEFAULTS_ROUTES = ("/v1/chat/completions", "/v1/completions")  # a target's request_defaults apply here
RANK_KEY = RANK_HEADER.lower()  # request headers arrive lower-cased
PASSED_HEADERS = ("x-session-id", "x-request-id", "accept", RANK_KEY)
JSON = [("content-type", "application/json")]
DEFAULT_REPLICA_CAP = 256


@dataclass(frozen=True)
class GatewayOptions:
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    request_timeout_s: float | None = None  # None: each target's own, else the topology's request_timeout_s
    replica_cap: int = DEFAULT_REPLICA_CAP
    unavailable_wait_s: float = 60.0
    api_key_env: str | None = None  # the bearer token clients must send, by variable name


@dataclass
class TargetPool:
    target: Target
    pool: ReplicaPool
    base: dict[int, str]  # id(replica) -> the URL its routes hang from ("http://h:p", or a provider's /v1 base)


class Gateway:
    """The request handler (`await gateway.handle(request, reply)`) over one routing, re-read by `reload`."""

    def __init__(self, routing: Routing, options: GatewayOptions, *, on_line: Callable[[str], None] | None = None,
                 cache: ResponseCache | None = None, identities: Mapping[str, str] | None = None) -> None:
        """`on_line` takes each request's profile.jsonl line (calllog.py): ProfileWriter.line."""
        self.options = options
        self.metrics = GatewayMetrics()
        self.on_line = on_line
        self.cache = cache
        self.identities = dict(identities or {})
        self.upstreams = Upstreams()
        self.probes = KeepAliveTransport()  # the pools' /health probes of ejected replicas
        self.forwarder = Forwarder(self.upstreams, options.retry, options.request_timeout_s or 600.0)
        self.routing = routing
        self.pools: dict[str, TargetPool] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self.started = time.time()
        self.reload(routing)

    # routing

    def reload(self, routing: Routing, identities: Mapping[str, str] | None = None) -> None:
        """Use `routing` from now on; a target whose replicas did not change keeps its pool (and its load)."""
        old = self.pools
        pools: dict[str, TargetPool] = {}
        for key, target in routing.targets.items():
            if target.kind == "service" or (target.kind == "model" and not target.addresses):
                continue
            kept = old.get(key)
            same = kept is not None and (kept.target.addresses, kept.target.base_url) == (target.addresses,
                                                                                          target.base_url)
            pools[key] = TargetPool(target, kept.pool, kept.base) if same and kept else self._pool(target)
        for key, kept in old.items():
            if pools.get(key) is None or pools[key].pool is not kept.pool:
                closing = asyncio.get_running_loop().create_task(kept.pool.close())  # its probes stop
                self._closing.add(closing)
                closing.add_done_callback(self._closing.discard)
        self.routing, self.pools = routing, pools
        self.forwarder.timeout_s = self.options.request_timeout_s or routing.request_timeout_s
        if identities is not None:
            self.identities = dict(identities)

    def _pool(self, target: Target) -> TargetPool:
        if target.kind == "provider":
            assert target.base_url is not None
            replicas = [Replica.for_provider(target.base_url, target.max_concurrency or self.options.replica_cap)]
            base = {id(replicas[0]): target.base_url.rstrip("/")}
        else:
            replicas = [Replica.for_server(host, port, self.options.replica_cap) for host, port in target.addresses]
            base = {id(r): f"http://{r.address}" for r in replicas}
        pool = ReplicaPool(target.name, replicas, self.probes, unavailable_wait_s=self.options.unavailable_wait_s,
                           affinity=target.affinity, lockstep=target.lockstep)
        return TargetPool(target, pool, base)

    def names(self) -> list[dict[str, Any]]:
        """The /v1/models cards: every role, model key, served name, adapter and provider a request may name."""
        cards: dict[str, dict[str, Any]] = {}

        def card(name: str, target: Target) -> None:
            if name in cards or target.name not in self.pools:
                return
            entry: dict[str, Any] = {"id": name, "object": "model", "created": int(self.started),
                                     "owned_by": "orchestra-ops", "root": target.served_name,
                                     "parent": self.routing.targets[target.adapter_of].served_name
                                     if target.adapter_of else None}
            if target.max_model_len:
                entry["max_model_len"] = target.max_model_len
            cards[name] = entry

        for role, key in self.routing.roles.items():
            card(role, self.routing.targets[key])
        for key, target in self.routing.targets.items():
            card(key, target)
            if target.kind == "model":
                card(target.served_name, target)
        return list(cards.values())

    # requests

    async def handle(self, request: Request, reply: Reply) -> None:
        path = request.path
        if path == "/health" and request.method in ("GET", "HEAD"):
            reply.send(200, JSON, json.dumps({"status": "ok", "models": len(self.pools)}).encode())
            return
        if not self._authorized(request):
            reply.send(401, JSON, error_body("missing or wrong bearer token (Authorization: Bearer …)",
                                             "authentication_error", 401))
            return
        if path in INFERENCE_ROUTES:
            if request.method != "POST":
                reply.send(405, [*JSON, ("allow", "POST")], error_body(f"{path} takes POST", "invalid_request_error",
                                                                       405))
                return
            await self._infer(request, reply, path)
        elif path == "/v1/models" and request.method == "GET":
            reply.send(200, JSON, json.dumps({"object": "list", "data": self.names()}).encode())
        elif path == "/metrics" and request.method == "GET":
            loads = [(key, r.address, r.outstanding) for key, tp in sorted(self.pools.items())
                     for r in tp.pool.replicas]
            reply.send(200, [("content-type", "text/plain; version=0.0.4")], self.metrics.render(loads).encode())
        else:
            reply.send(404, JSON, error_body(f"{request.method} {path} is not a route of the gateway (it forwards "
                                             f"{', '.join(INFERENCE_ROUTES)}; admin routes are never forwarded)",
                                             "not_found_error", 404))

    def _authorized(self, request: Request) -> bool:
        if self.options.api_key_env is None:
            return True
        expected = os.environ.get(self.options.api_key_env, "")
        given = request.headers.get("authorization", "")
        return bool(expected) and hmac.compare_digest(given.encode(), f"Bearer {expected}".encode())

    def _resolve(self, name: Any, route: str) -> TargetPool:
        if not isinstance(name, str) or not name:
            models = {tp.target.name for tp in self.pools.values() if tp.target.kind == "model"}
            if name is None and len(models) == 1:
                return self.pools[models.pop()]
            raise LookupError(f"the body names no model; name one of: {', '.join(sorted(self._all_names()))}")
        try:
            _, target = self.routing.resolve(name)
        except ConfigError as exc:
            raise LookupError(str(exc)) from None
        pool = self.pools.get(target.name)
        if pool is None:
            what = "a service" if target.kind == "service" else "served by no replica (not up?)"
            raise LookupError(f"'{name}' is {what}; names served here: {', '.join(sorted(self._all_names()))}")
        if target.kind == "provider" and route not in PROVIDER_ROUTES:
            raise LookupError(f"'{name}' is the external provider '{target.name}': {route} is not forwarded to it")
        return pool

    def _all_names(self) -> list[str]:
        return [card["id"] for card in self.names()]

    def _headers(self, target: Target, request: Request) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if target.kind != "provider":  # nothing about the client's tasks goes to an external provider
            for name in PASSED_HEADERS:
                value = request.headers.get(name)
                if value is not None:
                    headers[name] = value
        if target.api_key_env:
            key = os.environ.get(target.api_key_env)  # read per request; never stored or logged
            if not key:
                raise LookupError(f"provider '{target.name}' reads its key from ${target.api_key_env}, which is "
                                  "not set where the gateway runs")
            headers["authorization"] = f"Bearer {key}"
        return headers

    async def _infer(self, request: Request, reply: Reply, route: str) -> None:
        data = json_object(request.body)
        if data is None:
            reply.send(400, JSON, error_body(f"{route}: the body is not a JSON object", "invalid_request_error", 400))
            return
        requested = data.get("model")
        try:
            tp = self._resolve(requested, route)
        except LookupError as exc:
            reply.send(404, JSON, error_body(str(exc), "not_found_error", 404))
            return
        target = tp.target
        try:
            headers = self._headers(target, request)
        except LookupError as exc:
            reply.send(503, JSON, error_body(str(exc), "gateway_error", 503))
            return
        body = request.body
        if (target.request_defaults and route in DEFAULTS_ROUTES) or requested != target.served_name:
            data = merge_defaults(target.request_defaults if route in DEFAULTS_ROUTES else {}, data)
            data["model"] = target.served_name
            body = json.dumps(data).encode()
        stream = data.get("stream") is True
        path = route.removeprefix("/v1") if target.kind == "provider" else route  # a provider's base ends in /v1
        session = session_of(request.headers, data) if route in DEFAULTS_ROUTES else None
        if session is not None and tp.pool.sessions is not None and RANK_KEY not in headers:
            headers.update(rank_headers(target.dp_ranks, session))  # vLLM's internal DP keeps a session on one rank
        call = Call(path, body, headers, stream, session)
        role = requested if isinstance(requested, str) else target.name
        start_wall, start = time.time(), time.monotonic()
        key = self._cache_key(route, target, data, stream)
        if key is not None and self.cache is not None:
            cached = self.cache.get(key)
            if cached is not None:
                reply.send(200, JSON, cached)
                self._log(route, role, target, Forwarded(code="cache", replica="cache"), start_wall, start,
                          call.session, cached=True)
                return
        in_flight = self.metrics.in_flight
        in_flight[target.name] += 1
        done = Forwarded()
        try:
            await self.forwarder.forward(tp.pool, tp.base, call, reply, self._timeout(target), done)
        except asyncio.CancelledError:  # the client went away (after a stream's [DONE]: it had it all)
            if not done.delivered:
                done.status, done.error = "cancelled", "the client closed the connection before the answer ended"
            self._log(route, role, target, done, start_wall, start, call.session)
            raise
        finally:
            in_flight[target.name] -= 1
        if key is not None and done.body is not None and self.cache is not None:
            try:
                self.cache.put(key, target.served_name, done.body)
            except sqlite3.Error as exc:  # the answer went out; only its replay later is lost
                log.warning("response cache %s: could not store an answer: %s", self.cache.path, exc)
        self._log(route, role, target, done, start_wall, start, call.session)

    def _timeout(self, target: Target) -> float:
        return self.options.request_timeout_s or target.request_timeout_s or self.routing.request_timeout_s

    def _cache_key(self, route: str, target: Target, data: dict[str, Any], stream: bool) -> str | None:
        if self.cache is None or stream or route not in DEFAULTS_ROUTES or not self.cache.cacheable(data):
            return None
        identity = self.identities.get(target.name, f"model:{target.served_name}")
        return request_key({**data, "model": identity, "route": route})

    def _log(self, route: str, role: str, target: Target, done: Forwarded, start_wall: float, start: float,
             session: str | None, *, cached: bool = False) -> None:
        seconds = time.monotonic() - start
        if done.status == "ok" or cached:
            self.metrics.answered(target.name, done.replica or "-", done.code or "200", seconds)
        else:
            self.metrics.failed(target.name, done.status)
            if done.code:
                self.metrics.requests[(target.name, done.replica or "-", done.code)] += 1
        if done.attempts > 1:
            self.metrics.retries[target.name] += done.attempts - 1
        if self.on_line is None or route not in LOGGED_ROUTES:
            return
        self.on_line(call_line(role=role, model=target.name, replica=done.replica, start=start_wall, latency_s=seconds,
                               prompt_tokens=done.prompt_tokens, completion_tokens=done.completion_tokens,
                               attempts=done.attempts, status=done.status, error=done.error,
                               task=session if session and not session.startswith("h:") else None, cached=cached))

    async def close(self) -> None:
        for tp in self.pools.values():
            await tp.pool.close()
        await self.upstreams.close()
        await self.probes.close()
