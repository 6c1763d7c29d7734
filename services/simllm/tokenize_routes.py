"""`POST /tokenize` and `POST /detokenize` of the simulated engine, shaped like vLLM's (see tokens.py).

    POST /tokenize {"model"?, "prompt": text | "messages": [...], "return_token_strs"?}
        -> {"count", "max_model_len", "tokens": [id, ...], "token_strs": [str, ...] | null}
    POST /detokenize {"model"?, "tokens": [id, ...]} -> {"prompt": text}

`model` may be the served name or a loaded LoRA adapter (as vLLM); another is vLLM's 404. With
`messages`, the tokens are those of the chat request's prompt, so `count` equals the
`usage.prompt_tokens` a chat request with those messages (and `tools`) gets (replies.prompt_size):
the messages' texts and tool calls, concatenated, then `tokens.TEMPLATE_TOKENS_PER_MESSAGE`
template tokens per message (id `tokens.TEMPLATE_TOKEN`, no text), then the `tools` JSON.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web
from orchestra_ops.services.simllm import replies, tokens, wire
from orchestra_ops.services.simllm.config import SimConfig
from orchestra_ops.services.simllm.lora import AdapterTable


def _error(status: int, message: str) -> web.Response:
    return wire.error_response(status, message)


def chat_prompt_ids(body: dict[str, Any]) -> list[int]:
    """The sim's tokens of a chat request's prompt: as many as replies.prompt_size counts."""
    parts: list[str] = []
    messages = [m for m in body.get("messages") or [] if m is not None]
    for message in messages:
        parts.append(replies.message_text(message))
        if isinstance(message, dict):
            for call in message.get("tool_calls") or ():
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict):
                    parts.append(str(function.get("arguments", "")) + str(function.get("name", "")))
    ids = tokens.encode("".join(parts)) + [tokens.TEMPLATE_TOKEN] * (tokens.TEMPLATE_TOKENS_PER_MESSAGE
                                                                     * len(body.get("messages") or []))
    if body.get("tools"):
        ids += tokens.encode(json.dumps(body["tools"], separators=(",", ":")))
    return ids


def add_routes(app: web.Application, config: SimConfig, adapters: AdapterTable) -> None:
    async def read(request: web.Request) -> dict[str, Any] | web.Response:
        try:
            body = json.loads(await request.read())
        except ValueError as exc:
            return _error(400, f"request body is not valid JSON: {exc}")
        if not isinstance(body, dict):
            return _error(400, "request body must be a JSON object")
        if adapters.resolve(body.get("model")) is None:
            return wire.unknown_model(body.get("model"), config.model)
        return body

    async def tokenize(request: web.Request) -> web.Response:
        body = await read(request)
        if isinstance(body, web.Response):
            return body
        if isinstance(body.get("prompt"), str):
            ids = tokens.encode(body["prompt"])
        elif isinstance(body.get("messages"), list):
            ids = chat_prompt_ids(body)
        else:
            return _error(400, "give 'prompt' (a string) or 'messages' (a list)")
        strs = [tokens.decode([i]) for i in ids] if body.get("return_token_strs") else None
        return web.Response(text=wire.dumps({"count": len(ids), "max_model_len": config.max_model_len,
                                             "tokens": ids, "token_strs": strs}), content_type=wire.JSON)

    async def detokenize(request: web.Request) -> web.Response:
        body = await read(request)
        if isinstance(body, web.Response):
            return body
        ids = body.get("tokens")
        if not isinstance(ids, list):
            return _error(400, "'tokens' must be a list of token ids")
        try:
            text = tokens.decode(ids)
        except (ValueError, OverflowError) as exc:
            return _error(400, str(exc))
        return web.Response(text=wire.dumps({"prompt": text}), content_type=wire.JSON)

    app.router.add_post("/tokenize", tokenize)
    app.router.add_post("/detokenize", detokenize)
