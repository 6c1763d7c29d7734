"""The retrieval client: ToolOrchestra's POST /retrieve with bounded retries, never a hang.

    {"queries": [query], "topk": k, "return_scores": true, "eid": <task id>}
        -> [[{"document": {"content" | "contents": …, …}, "score": s[, "source": "local"|"tavily"]}, …]]

A request goes to the replica of the service with the fewest requests in flight. A connection
error, a timeout, a 429 or a 5xx is retried after `min(backoff_s * 2**min(attempt, 4), backoff_max_s)`
(1, 2, 4 s by default) up to `attempts` (4), and never past `deadline_s` (60 s) per service: a dead
service is given up after about 7 s, a hanging one after at most a minute (the original looped
forever; this client once waited ~74 s). A 4xx other than 429 is not retried. When every service
in the list stays down, the result carries no documents and says why (`error`): the agent suites
then fail the task as `retrieval_unavailable`, or go on without documents when asked to.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestra_ops.client.call_errors import TransportError
from orchestra_ops.client.replica import Replica
from orchestra_ops.client.routing import Routing
from orchestra_ops.client.transport import Transport


@dataclass(frozen=True)
class RetrievalSettings:
    attempts: int = 4
    timeout_s: float = 60.0
    backoff_s: float = 1.0
    backoff_max_s: float = 15.0
    deadline_s: float = 60.0  # all attempts at one service, waits included

    def delay(self, failed_attempt: int) -> float:
        """Seconds to wait after the 0-based attempt `failed_attempt` failed."""
        return min(self.backoff_s * 2 ** min(failed_attempt, 4), self.backoff_max_s)


@dataclass
class RetrievalResult:
    """The documents of one query, best first, and how getting them went."""

    documents: list[str] = field(default_factory=list)  # each hit's content (or contents)
    service: str | None = None  # the service that answered
    replica: str | None = None
    attempts: int = 0
    retries: int = 0
    latency_s: float = 0.0
    error: str | None = None  # set when no service answered (documents is then empty)
    local_hits: int = 0
    tavily_hits: int = 0  # hits with source "tavily" or a negative score (the server's web fallback)

    @property
    def backend(self) -> str:
        if self.error is not None:
            return "retrieval_unavailable"
        return "tavily_fallback" if self.tavily_hits else "local_only"


class RetrievalClient:
    """POST /retrieve to the services a routing declares (one instance per run)."""

    def __init__(self, routing: Routing, transport: Transport) -> None:
        self.routing = routing
        self.transport = transport
        self._replicas: dict[str, list[Replica]] = {}

    def _service(self, name: str) -> list[Replica]:
        replicas = self._replicas.get(name)
        if replicas is None:
            target = self.routing.targets[name]
            replicas = [Replica(address=f"{host}:{port}", chat_url=f"http://{host}:{port}/retrieve",
                                health_url=f"http://{host}:{port}/health", cap=1 << 16)
                        for host, port in target.addresses]
            self._replicas[name] = replicas
        return replicas

    async def retrieve(self, services: Sequence[str], query: str, *, topk: int, eid: Any,
                       settings: RetrievalSettings) -> RetrievalResult:
        payload = json.dumps({"queries": [query], "topk": topk, "return_scores": True, "eid": eid}).encode()
        result = RetrievalResult()
        start = time.monotonic()
        errors: list[str] = []
        for name in services:
            replicas = self._service(name)
            if not replicas:
                errors.append(f"{name}: no replicas in the endpoints file")
                continue
            hits, error = await self._try(name, replicas, payload, settings, result)
            if error is None:
                _fill(result, hits)
                result.service = name
                break
            errors.append(error)
        else:
            result.error = "; ".join(errors) or "no retrieval service declared"
        result.latency_s = time.monotonic() - start
        return result

    async def _try(self, name: str, replicas: list[Replica], payload: bytes, settings: RetrievalSettings,
                   result: RetrievalResult) -> tuple[list[Any], str | None]:
        error = ""
        previous: Replica | None = None
        deadline = time.monotonic() + settings.deadline_s
        for attempt in range(settings.attempts):
            candidates = [r for r in replicas if r is not previous] or replicas
            replica = min(candidates, key=lambda r: r.outstanding)
            previous = replica
            replica.outstanding += 1
            result.attempts += 1
            result.replica = replica.address
            retryable = True
            try:
                timeout = max(0.1, min(settings.timeout_s, deadline - time.monotonic()))
                resp = await self.transport.post(replica, replica.chat_url, payload,
                                                 {"Content-Type": "application/json"}, timeout)
            except TransportError as exc:
                error = f"{name} {replica.address}: {exc.message}"
            else:
                if resp.status == 200:
                    try:
                        data = json.loads(resp.body)
                        return (data[0] if isinstance(data, list) and data and isinstance(data[0], list) else []), None
                    except ValueError:
                        error = f"{name} {replica.address}: the answer is not JSON"
                else:
                    detail = resp.body[:200].decode(errors="replace")
                    error = f"{name} {replica.address} answered {resp.status}: {detail}"
                    retryable = resp.status == 429 or resp.status >= 500
            finally:
                replica.outstanding -= 1
            result.retries += 1  # as the original counts: one per failed attempt
            if not retryable or time.monotonic() + settings.delay(attempt) >= deadline:
                break
            if attempt + 1 < settings.attempts:
                await asyncio.sleep(settings.delay(attempt))
        return [], f"{error} (after {result.attempts} attempt(s))"


def _fill(result: RetrievalResult, hits: list[Any]) -> None:
    for hit in hits:
        if not isinstance(hit, dict):
            continue
        document = hit.get("document")
        if not isinstance(document, dict):
            continue
        text = document.get("content", document.get("contents"))
        if not isinstance(text, str):
            continue
        result.documents.append(text)
        score = hit.get("score")
        if hit.get("source") == "tavily" or (isinstance(score, (int, float)) and score < 0):
            result.tavily_hits += 1
        else:
            result.local_hits += 1
