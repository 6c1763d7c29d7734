"""FleetClient: the clients of one run, one ModelClient (and ReplicaPool) per target it calls."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from orchestra_ops.client.affinity import Move
from orchestra_ops.client.cache import ResponseCache
from orchestra_ops.client.call_errors import TransportError
from orchestra_ops.client.chat import CallEvent, ChatResult, Message, ModelClient
from orchestra_ops.client.identity import Identity, identity_digest, static_identity
from orchestra_ops.client.pool import ReplicaPool
from orchestra_ops.client.replica import Replica
from orchestra_ops.client.retry import RetryPolicy
from orchestra_ops.client.routing import Routing, Target
from orchestra_ops.client.transport import KeepAliveTransport, Transport
from orchestra_ops.errors import ConfigError

log = logging.getLogger(__name__)

DEFAULT_REPLICA_CAP = 256


class FleetClient:
    def __init__(self, routing: Routing, *, retry: RetryPolicy | None = None,
                 request_timeout_s: float | None = None, replica_cap: int = DEFAULT_REPLICA_CAP,
                 unavailable_wait_s: float = 60.0, transport: Transport | None = None,
                 on_call: Callable[[CallEvent], None] | None = None, cache: ResponseCache | None = None,
                 identities: Mapping[str, Identity] | None = None) -> None:
        self.routing = routing
        self.cache = cache
        self.identities: dict[str, Identity] = dict(identities or {})  # target -> what it stands for (cache keys)
        self.retry = retry or RetryPolicy()
        self.request_timeout_s = request_timeout_s or routing.request_timeout_s
        self._timeout_from_cli = request_timeout_s is not None  # --timeout overrides every per-model one
        self._limits: dict[str, int] = {}
        self.replica_cap = replica_cap
        self.unavailable_wait_s = unavailable_wait_s
        self.transport: Transport = transport or KeepAliveTransport()
        self.on_call = on_call
        self._clients: dict[str, ModelClient] = {}
        self.on_eject: Callable[[str, str, str], None] | None = None  # each pool's ejections (pool, replica, reason)
        self.on_move: Callable[[str, Move], None] | None = None  # each pool's session moves (pool, move)

    def check(self, names: Iterable[str]) -> list[Target]:
        """Resolve every name a run will call, before any request: unknown names, models without
        replicas and providers whose key variable is unset are ConfigErrors."""
        targets = []
        for name in names:
            target = self.routing.chat_target(name)
            if target.api_key_env and not os.environ.get(target.api_key_env):
                raise ConfigError(f"provider '{target.name}' reads its key from ${target.api_key_env}, which is "
                                  "not set in this environment")
            targets.append(target)
        return targets

    def replica_count(self, names: Iterable[str]) -> int:
        return sum(max(1, len(t.addresses)) for t in {id(t): t for t in self.check(names)}.values())

    def client(self, name: str) -> ModelClient:
        target = self.routing.chat_target(name)
        client = self._clients.get(target.name)
        if client is None:
            client = self._make_client(target)
            self._clients[target.name] = client
        return client

    def _make_client(self, target: Target) -> ModelClient:
        if target.kind == "provider":
            assert target.base_url is not None
            replicas = [Replica.for_provider(target.base_url, target.max_concurrency or self.replica_cap)]
        else:
            replicas = [Replica.for_server(host, port, self.replica_cap) for host, port in target.addresses]
        pool = ReplicaPool(target.name, replicas, self.transport, unavailable_wait_s=self.unavailable_wait_s,
                           affinity=target.affinity, lockstep=target.lockstep)
        pool.on_eject = self.on_eject
        pool.on_move = self.on_move
        timeout = self.request_timeout_s if self._timeout_from_cli else (target.request_timeout_s
                                                                         or self.request_timeout_s)
        limit = self._limits.get(target.name)
        identity = None
        if self.cache is not None:
            if target.name not in self.identities:  # a name the run did not announce: what is declared
                self.identities[target.name] = static_identity(target, self.routing.workdir,
                                                                declared=self.routing.declared)
            identity = identity_digest(self.identities[target.name])
        return ModelClient(name=target.name, served_name=target.served_name, pool=pool,
                           request_timeout_s=timeout, retry=self.retry,
                           slots=asyncio.Semaphore(limit) if limit else None,
                           request_defaults=target.request_defaults, max_model_len=target.max_model_len,
                           api_key_env=target.api_key_env, on_call=self.on_call, cache=self.cache,
                           identity=identity, price=target.price, dp_ranks=target.dp_ranks)

    def end_session(self, session: str) -> None:
        """A unit of work is done: every pool forgets where its session was (the table stays bounded)."""
        for client in self._clients.values():
            client.pool.end_session(session)

    def limit(self, name: str, concurrency: int) -> None:
        """At most `concurrency` calls in flight to `name`'s target at once (e.g. a judge's own cap).

        Call before the first request to that target; the cap is per target, shared by every role
        that resolves to it.
        """
        target = self.routing.chat_target(name)
        if target.name in self._clients:
            raise RuntimeError(f"limit({name!r}) after the first call to {target.name!r}")
        self._limits[target.name] = concurrency

    async def chat(self, name: str, messages: Sequence[Message], *, task: str | int | None = None,
                   session: str | None = None, **params: Any) -> ChatResult:
        return await self.client(name).chat(messages, role=name, task=task, session=session, **params)

    async def discover_limits(self, names: Iterable[str]) -> None:
        """Best effort: read `max_model_len` from `/v1/models` for local models that do not declare it."""
        for name in names:
            client = self.client(name)
            if client.max_model_len is not None or client.api_key_env is not None:
                continue
            replica = client.pool.replicas[0]
            if replica.health_url is None:
                continue
            try:
                resp = await self.transport.get(replica, replica.models_url, timeout=5.0)
                data = json.loads(resp.body) if resp.status == 200 else {}
            except (TransportError, ValueError):
                continue
            for item in data.get("data", []) if isinstance(data, dict) else []:
                if isinstance(item, dict) and item.get("id") == client.served_name:
                    limit = item.get("max_model_len")
                    if isinstance(limit, int) and limit > 0:
                        client.max_model_len = limit
                        log.info("%s: max_model_len %d (from %s)", client.name, limit, replica.models_url)

    def pools(self) -> list[ReplicaPool]:
        return [c.pool for c in self._clients.values()]

    async def close(self) -> None:
        for client in self._clients.values():
            await client.pool.close()
        await self.transport.close()
