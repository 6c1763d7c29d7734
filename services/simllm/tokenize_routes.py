"""`POST /tokenize` and `POST /detokenize` of the simulated engine, shaped like vLLM's (see tokens.py)."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web
from orchestra_ops.services.simllm import rules, tokens
from orchestra_ops.services.simllm.config import SimConfig

_JSON = "application/json"


def _error(status: int, message: str) -> web.Response:
    body = {"error": {"message": message, "type": "BadRequestError" if status == 400 else "NotFoundError",
                      "param": None, "code": status}}
    return web.Response(status=status, text=json.dumps(body), content_type=_JSON)


def add_routes(app: web.Application, config: SimConfig) -> None:
    async def read(request: web.Request) -> dict[str, Any] | web.Response:
        try:
            body = json.loads(await request.read())
        except ValueError as exc:
            return _error(400, f"request body is not valid JSON: {exc}")
        if not isinstance(body, dict):
            return _error(400, "request body must be a JSON object")
        if body.get("model") not in (None, config.model):
            return _error(404, f"The model `{body.get('model')}` does not exist.")
        return body

    async def tokenize(request: web.Request) -> web.Response:
        body = await read(request)
        if isinstance(body, web.Response):
            return body
        if isinstance(body.get("prompt"), str):
            text = body["prompt"]
        elif isinstance(body.get("messages"), list):
            text = "\n".join(rules.message_text(m) for m in body["messages"])
        else:
            return _error(400, "give 'prompt' (a string) or 'messages' (a list)")
        ids = tokens.encode(text)
        return web.Response(text=json.dumps({"count": len(ids), "max_model_len": config.max_model_len,
                                             "tokens": ids}), content_type=_JSON)

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
        return web.Response(text=json.dumps({"prompt": text}), content_type=_JSON)

    app.router.add_post("/tokenize", tokenize)
    app.router.add_post("/detokenize", detokenize)
