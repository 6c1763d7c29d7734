"""The simulated engine's chat answer and its SSE stream, as vLLM 0.32 sends it (wire.py).

ChatAnswer is what one chat request gets back, whichever way it is sent (app.py composes it);
stream_answer writes it as vLLM's stream: the fixed and prefill part of the delay is spent before the
first chunk, the decode part between content chunks. app.py answers the JSON form itself.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from orchestra_ops.services.simllm import replies, wire
from orchestra_ops.services.simllm.config import SimConfig

_STREAM_PIECES = 8


def stream_pieces(text: str) -> list[str]:
    """A text in at most _STREAM_PIECES consecutive pieces (the sim's streamed deltas)."""
    if not text:
        return []
    step = max(1, -(-len(text) // _STREAM_PIECES))
    return [text[start:start + step] for start in range(0, len(text), step)]


@dataclass
class ChatAnswer:
    """What one chat request gets back, whichever way it is sent."""

    persona: str
    reply: replies.Reply
    n_prompt: int
    n_completion: int
    details: dict[str, Any] | None  # prompt_tokens_details (None without the flag)
    cached: int = 0  # prompt tokens its prefix cache held (no prefill for them)
    decode_factor: float = 1.0  # the decode slowdown of the requests in flight when it arrived

    @property
    def uncached(self) -> int:
        return self.n_prompt - self.cached



async def stream_answer(request: web.Request, body: dict[str, Any], config: SimConfig, answer: ChatAnswer,
                        request_id: str, factor: float, calls: list[dict[str, Any]]) -> web.StreamResponse:
    """vLLM's SSE stream: a first delta {role, content ""}, the content deltas (the last carries
    finish_reason), tool-call deltas then an empty delta with finish_reason, the usage chunk
    (`stream_options.include_usage` or --enable-force-include-usage), `[DONE]`. The last chunk
    before `[DONE]` carries system_fingerprint; without --enable-force-include-usage the other
    chunks have no `usage` key (both checked against vLLM 0.32). `factor` is the request's latency
    factor (faults.py), `calls` its tool calls as the JSON answer carries them."""
    reply = answer.reply
    force_usage = config.enable_force_include_usage
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8",
                                           "Cache-Control": "no-cache"})
    await response.prepare(request)
    head = {"id": request_id, "object": "chat.completion.chunk",
            "created": int(time.time()), "model": answer.persona}
    sent = 0  # completion tokens streamed so far (force-include-usage reports them on every chunk)

    async def send(choice: dict[str, Any], tokens: int, extra: dict[str, Any] | None = None) -> None:
        nonlocal sent
        decode_ms = config.decode_ms_per_token * tokens * factor * answer.decode_factor
        if decode_ms > 0:
            await asyncio.sleep(decode_ms / 1000.0)
        sent = min(answer.n_completion, sent + tokens)
        chunk: dict[str, Any] = {**head, "choices": [{"index": 0, **choice}]}
        if force_usage:
            chunk["usage"] = {"prompt_tokens": answer.n_prompt, "total_tokens": answer.n_prompt + sent,
                              "completion_tokens": sent, "completion_tokens_details": None}
        await response.write(wire.sse({**chunk, **(extra or {})}))

    first_ms = (config.latency_ms + config.prefill_ms_per_token * answer.uncached) * factor
    if first_ms > 0:
        await asyncio.sleep(first_ms / 1000.0)
    await send({"delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}, 0,
               {"prompt_token_ids": None, "prompt_text": None})
    pieces = stream_pieces(reply.content or "")
    options = body.get("stream_options")
    usage_chunk = force_usage or (isinstance(options, dict) and bool(options.get("include_usage")))
    # the stream's last chunk names the system: the usage chunk, else the finishing chunk (as vLLM)
    closing = None if usage_chunk else {"system_fingerprint": wire.SYSTEM_FINGERPRINT}
    for number, piece in enumerate(pieces, 1):
        last = number == len(pieces) and not calls
        choice: dict[str, Any] = {"delta": {"content": piece}, "logprobs": None,
                                  "finish_reason": reply.finish_reason if last else None}
        if last:
            choice["stop_reason"] = None
        choice["token_ids"] = None
        await send(choice, replies.estimate_tokens(piece), closing if last else None)
    for i, call in enumerate(calls):
        function = call["function"]
        for number, piece in enumerate(stream_pieces(function["arguments"]) or [""]):
            delta = ({"id": call["id"], "type": "function", "index": i,
                      "function": {"name": function["name"], "arguments": piece}} if number == 0
                     else {"index": i, "function": {"name": None, "arguments": piece}})
            await send({"delta": {"tool_calls": [delta]}, "logprobs": None, "finish_reason": None,
                        "token_ids": None}, replies.estimate_tokens(piece))
    if calls or not pieces:
        await send({"delta": {}, "logprobs": None, "finish_reason": reply.finish_reason, "stop_reason": None,
                    "token_ids": None}, 0, closing)
    if usage_chunk:
        final: dict[str, Any] = {"prompt_tokens": answer.n_prompt,
                                 "total_tokens": answer.n_prompt + answer.n_completion,
                                 "completion_tokens": answer.n_completion}
        if answer.details is not None:
            final["prompt_tokens_details"] = wire.prompt_details(
                answer.details["cached_tokens"], answer.details["created_cache_tokens"], stream=True)
        await response.write(wire.sse({**head, "choices": [], "usage": final,
                                       "system_fingerprint": wire.SYSTEM_FINGERPRINT}))
    await response.write(wire.DONE)
    await response.write_eof()
    return response
