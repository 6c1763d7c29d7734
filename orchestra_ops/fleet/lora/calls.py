"""HTTP calls of `ops lora` to vLLM replicas: load or unload on each, then read /v1/models to be sure."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from orchestra_ops.core.error_body import error_message
from orchestra_ops.fleet.state import ProcessRecord


@dataclass(frozen=True)
class ReplicaOutcome:
    replica: str
    address: str
    ok: bool
    status: int | None  # the HTTP status, None when nothing answered
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"replica": self.replica, "address": self.address, "ok": self.ok, "status": self.status,
                "message": self.message}



ReplicaCall = Callable[[httpx.AsyncClient, ProcessRecord], Awaitable[ReplicaOutcome]]


async def each(replicas: list[ProcessRecord], timeout_s: float, call: ReplicaCall) -> list[ReplicaOutcome]:
    """`call` on every replica at once; outcomes in replica order."""
    if not replicas:
        return []
    async with httpx.AsyncClient(timeout=timeout_s, trust_env=False) as client:
        return list(await asyncio.gather(*(call(client, r) for r in replicas)))


def _outcome(record: ProcessRecord, ok: bool, status: int | None, message: str) -> ReplicaOutcome:
    return ReplicaOutcome(record.name, f"{record.host}:{record.port}", ok, status, message)


async def _post(client: httpx.AsyncClient, record: ProcessRecord, route: str,
                body: dict[str, Any]) -> tuple[int | None, str]:
    try:
        response = await client.post(f"{record.base_url}{route}", json=body)
    except httpx.HTTPError as exc:
        return None, f"no answer ({type(exc).__name__}: {exc})".replace(": )", ")")
    return response.status_code, _message(response)


async def model_cards(client: httpx.AsyncClient, record: ProcessRecord) -> dict[str, dict[str, Any]] | str:
    """id -> card of /v1/models, or why it could not be read."""
    try:
        response = await client.get(f"{record.base_url}/v1/models")
        cards = response.json().get("data", []) if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        return f"/v1/models did not answer ({type(exc).__name__})"
    if not isinstance(cards, list):
        return f"/v1/models answered {response.status_code}"
    return {str(c.get("id")): c for c in cards if isinstance(c, dict)}


async def load_one(client: httpx.AsyncClient, record: ProcessRecord, name: str, path: str) -> ReplicaOutcome:
    status, message = await _post(client, record, "/v1/load_lora_adapter", {"lora_name": name, "lora_path": path})
    if status is None:
        return _outcome(record, False, None, message)
    if status != 200:
        hint = " (the route is missing: was it started with runtime_lora: true?)" if status in (404, 405) \
            and "adapter" not in message.lower() else ""
        return _outcome(record, False, status, f"answered {status}: {message}{hint}")
    cards = await model_cards(client, record)
    if isinstance(cards, str):
        return _outcome(record, False, status, f"loaded it, but {cards}")
    if name not in cards:
        return _outcome(record, False, status, f"answered 200, but /v1/models does not list '{name}'")
    return _outcome(record, True, status, f"serves '{name}' (parent {cards[name].get('parent')})")


async def unload_one(client: httpx.AsyncClient, record: ProcessRecord, name: str) -> ReplicaOutcome:
    status, message = await _post(client, record, "/v1/unload_lora_adapter", {"lora_name": name})
    if status is None:
        return _outcome(record, False, None, message)
    if status not in (200, 404):
        return _outcome(record, False, status, f"answered {status}: {message}")
    cards = await model_cards(client, record)
    if isinstance(cards, str):
        return _outcome(record, False, status, cards)
    if name in cards:
        return _outcome(record, False, status, f"answered {status}, but /v1/models still lists '{name}'")
    return _outcome(record, True, status, "removed" if status == 200 else "was not loaded")


def _message(response: httpx.Response) -> str:
    """vLLM's error text (`{"error": {"message"}}`, older `{"message"}`), else the body itself."""
    return error_message(response.content).removeprefix(f"{response.status_code}: ")
