"""A cheap prompt-size estimate, used to refuse prompts that cannot fit `max_model_len`.

The same estimate the simulated engine documents (services/simllm/rules.py): one token per 4
characters of message text (text parts joined by newlines, tool-call names and arguments included),
rounded up, plus 4 tokens per message, plus the tools' compact JSON at 4 characters a token. Real
tokenizers give about 4 characters per token on English and more tokens on code or non-Latin
scripts, so against vLLM the estimate errs low: it refuses only prompts that are clearly too long,
and one that slips through gets the server's 400, which is recorded (never retried).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

TOKENS_PER_MESSAGE = 4


def estimate_text_tokens(text: str) -> int:
    return (len(text) + 3) // 4


def _message_chars(message: Mapping[str, Any]) -> int:
    content = message.get("content")
    chars = 0
    if isinstance(content, str):
        chars = len(content)
    elif isinstance(content, list):
        texts = [str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("text") is not None]
        chars = len("\n".join(texts))
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            chars += len(str(function.get("arguments", ""))) + len(str(function.get("name", "")))
    return chars


def estimate_prompt_tokens(messages: Sequence[Mapping[str, Any]], tools: Any = None) -> int:
    """Estimated prompt tokens of a chat request's messages (and tools)."""
    chars = sum(_message_chars(m) for m in messages if isinstance(m, Mapping))
    total = (chars + 3) // 4 + TOKENS_PER_MESSAGE * len(messages)
    if tools:
        total += estimate_text_tokens(json.dumps(tools, separators=(",", ":")))
    return total
