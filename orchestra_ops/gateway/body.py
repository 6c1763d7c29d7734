"""What the gateway reads from and changes in a request body: the affinity key, a target's defaults."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def session_of(headers: Mapping[str, str], data: Mapping[str, Any]) -> str | None:
    """The affinity key: the client's `x-session-id`, else a hash of the first system and user message."""
    given = headers.get("x-session-id")
    if given:
        return given
    messages = data.get("messages")
    if not isinstance(messages, list):
        return None
    first: dict[str, Any] = {}
    for message in messages:
        if isinstance(message, dict) and message.get("role") in ("system", "user") and \
                message["role"] not in first:
            first[message["role"]] = message.get("content")
            if len(first) == 2:
                break
    if not first:
        return None
    user = _text(first.get("user"))
    system = first.get("system")
    if system is None:
        text = f"-\x00{user}"
    else:
        system = _text(system)
        text = f"{len(system)}:{system}\x00{user}"
    return "h:" + hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _text(content: Any) -> str:
    """A message's content as hashed: a string as it is, anything else (parts, null) as sorted JSON."""
    return content if isinstance(content, str) else json.dumps(content, sort_keys=True, default=str)


def merge_defaults(defaults: Mapping[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """A target's request_defaults under the client's body (the client's values win; dicts merged)."""
    body: dict[str, Any] = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in defaults.items()}
    for key, value in data.items():
        if isinstance(value, Mapping) and isinstance(body.get(key), dict):
            body[key] = {**body[key], **value}
        else:
            body[key] = value
    return body
