"""What an OpenAI-compatible server's error body says (vLLM, the simulated engine, a provider), as one line."""

from __future__ import annotations

import json


def error_message(body: bytes) -> str:
    """vLLM answers `{"message": …}` (or `{"error": {"message": …}}` like OpenAI); else the raw text."""
    try:
        data = json.loads(body)
    except ValueError:
        return body[:500].decode(errors="replace").strip() or "(empty body)"
    if isinstance(data, dict):
        inner = data.get("error")
        if isinstance(inner, dict) and "message" in inner:
            return str(inner["message"])
        if "message" in data:
            return str(data["message"])
        if "detail" in data:
            return str(data["detail"])
    return json.dumps(data)[:500]
