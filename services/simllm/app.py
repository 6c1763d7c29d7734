"""The HTTP server of the simulated engine (aiohttp.web, minimal work per request).

Endpoints: `GET /health` (200, empty), `GET /v1/models` (the served name with `max_model_len`),
`POST /v1/chat/completions` (JSON or SSE with `stream: true`; the usage chunk comes when
`stream_options.include_usage` is true, as in vLLM), `GET /metrics` (Prometheus text),
`POST /tokenize` and `POST /detokenize` (tokens.py).

Order of work for a chat request: it draws its Fate (faults.py); a body that is not a JSON object
is a 400; a `model` other than the served name or an adapter (lora.py) is a 404 (as vLLM; no `model`
means the served one);
a prompt over max_model_len (or prompt + max_tokens over it) is vLLM's 400 "This model's maximum
context length is …"; then an injected error status (429 with Retry-After), a hang (never
answered; cancelled when the client goes), or the answer (rules.py) after
`(latency_ms + prefill_ms_per_token * prompt_tokens + decode_ms_per_token * completion_tokens)
* latency_factor` ms. Streaming spends the fixed and
prefill part before the first chunk and the decode part between content chunks.

`--crash-after N`: the process exits with status 1 right after answering its N-th chat request;
requests arriving after the N-th are never answered. /health, /models and /metrics are not counted.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import time
from typing import Any

import psutil
from aiohttp import web
from orchestra_ops.services.simllm import lora, rules
from orchestra_ops.services.simllm.config import SimConfig
from orchestra_ops.services.simllm.faults import Fate, FaultPlan
from orchestra_ops.services.simllm.metrics import SimMetrics
from orchestra_ops.services.simllm.tokenize_routes import add_routes as add_tokenize_routes

from orchestra_ops.errors import LaunchError

log = logging.getLogger(__name__)

_JSON = "application/json"
_STREAM_PIECES = 8
_ERROR_TYPES = {400: "BadRequestError", 404: "NotFoundError", 408: "RequestTimeoutError",
                429: "TooManyRequestsError", 500: "InternalServerError", 502: "BadGatewayError",
                503: "ServiceUnavailableError", 504: "GatewayTimeoutError"}


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    """vLLM's error body: `{"error": {"message", "type", "param", "code"}}`."""
    body = {"error": {"message": message, "type": _ERROR_TYPES.get(status, "APIError"), "param": None,
                      "code": status}}
    return web.Response(status=status, text=_dumps(body), content_type=_JSON, headers=headers)


class SimEngine:
    """One simulated replica: the request handlers and their state."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.faults = FaultPlan(config)
        self.metrics = SimMetrics(config.model, config.max_model_len)
        self._created = int(time.time())
        self._base_card = {"id": config.model, "object": "model", "created": self._created, "owned_by": "vllm",
                           "root": config.model, "parent": None, "max_model_len": config.max_model_len,
                           "permission": []}
        self.adapters = lora.AdapterTable(config)
        retry = config.retry_after_s
        self._retry_after = str(int(retry)) if retry == int(retry) else f"{retry:g}"

    def app(self) -> web.Application:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_get("/health", self.health)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/metrics", self.metrics_text)
        app.router.add_post("/v1/chat/completions", self.chat)
        lora.add_routes(app, self.adapters)
        add_tokenize_routes(app, self.config)  # /tokenize, /detokenize (tokenize_routes.py)
        return app

    async def health(self, request: web.Request) -> web.Response:
        return web.Response()

    async def models(self, request: web.Request) -> web.Response:
        body = {"object": "list", "data": [self._base_card, *self.adapters.cards()]}
        return web.Response(text=_dumps(body), content_type=_JSON)

    async def metrics_text(self, request: web.Request) -> web.Response:
        return web.Response(text=self.metrics.render(), content_type="text/plain", charset="utf-8")

    async def chat(self, request: web.Request) -> web.StreamResponse:
        fate = self.faults.next()
        metrics = self.metrics
        metrics.started()
        try:
            crash_after = self.config.crash_after
            if crash_after is not None and fate.index > crash_after:
                await asyncio.Future()  # past the crash point: never answered
            response = await self._answer(request, fate)
            if crash_after is not None and fate.index == crash_after:
                if not response.prepared:
                    await response.prepare(request)
                    await response.write_eof()
                log.warning("crash-after %d reached: exiting with status 1", crash_after)
                asyncio.get_running_loop().call_soon(os._exit, 1)
            return response
        finally:
            metrics.finished()

    async def _answer(self, request: web.Request, fate: Fate) -> web.StreamResponse:
        config = self.config
        metrics = self.metrics
        try:
            body = json.loads(await request.read())
        except ValueError as exc:
            metrics.failed[400] += 1
            return error_response(400, f"request body is not valid JSON: {exc}")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            metrics.failed[400] += 1
            return error_response(400, "request body must be a JSON object with a 'messages' list")
        persona = self.adapters.resolve(body.get("model"))
        if persona is None:
            metrics.failed[404] += 1
            return error_response(404, f"The model `{body.get('model')}` does not exist.")
        body["model"] = persona  # the rules answer as the model asked for (an adapter answers as itself)
        n_prompt = rules.prompt_tokens(body)
        too_long = self._context_error(n_prompt, body.get("max_tokens") or body.get("max_completion_tokens"))
        if too_long:
            metrics.failed[400] += 1
            return error_response(400, too_long)
        if fate.status is not None:
            metrics.failed[fate.status] += 1
            headers = {"Retry-After": self._retry_after} if fate.status == 429 else None
            return error_response(fate.status, f"simulated failure ({fate.status})", headers)
        if fate.hang and fate.index != config.crash_after:
            metrics.hung += 1
            await asyncio.Future()
        reply = rules.respond(body)
        if self.adapters.is_adapter(persona):
            reply = lora.adapter_reply(reply, persona)
        if reply.judge and fate.malformed:
            metrics.malformed += 1
            reply = rules.malformed(reply)
        n_completion = rules.completion_tokens(reply)
        metrics.tokens_in_flight += n_prompt + n_completion
        try:
            if body.get("stream"):
                return await self._stream(request, body, fate, reply, n_prompt, n_completion)
            delay_ms = (config.latency_ms + config.prefill_ms_per_token * n_prompt
                        + config.decode_ms_per_token * n_completion) * fate.latency_factor
            if delay_ms > 0:
                await asyncio.sleep(delay_ms / 1000.0)
            message: dict[str, Any] = {"role": "assistant", "content": reply.content,
                                       "tool_calls": self._tool_calls(fate, reply)}
            payload = {
                "id": f"chatcmpl-sim{config.seed}-{fate.index}", "object": "chat.completion",
                "created": int(time.time()), "model": persona,
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": reply.finish_reason, "stop_reason": None}],
                "usage": {"prompt_tokens": n_prompt, "total_tokens": n_prompt + n_completion,
                          "completion_tokens": n_completion, "prompt_tokens_details": None},
                "prompt_logprobs": None,
            }
            self._count_success(reply, n_prompt, n_completion)
            return web.Response(text=_dumps(payload), content_type=_JSON)
        finally:
            metrics.tokens_in_flight -= n_prompt + n_completion

    def _context_error(self, n_prompt: int, max_tokens: Any) -> str | None:
        limit = self.config.max_model_len
        if n_prompt > limit:
            return (f"This model's maximum context length is {limit} tokens. However, you requested "
                    f"{n_prompt} tokens in the messages, Please reduce the length of the messages.")
        if isinstance(max_tokens, int) and n_prompt + max_tokens > limit:
            return (f"This model's maximum context length is {limit} tokens. However, you requested "
                    f"{n_prompt + max_tokens} tokens ({n_prompt} in the messages, {max_tokens} in the "
                    "completion). Please reduce the length of the messages or completion.")
        return None

    def _tool_calls(self, fate: Fate, reply: rules.Reply) -> list[dict[str, Any]]:
        return [{"id": f"chatcmpl-tool-{fate.index}-{i}", "type": "function",
                 "function": {"name": call["name"], "arguments": call["arguments"]}}
                for i, call in enumerate(reply.tool_calls)]

    def _count_success(self, reply: rules.Reply, n_prompt: int, n_completion: int) -> None:
        self.metrics.success[reply.finish_reason] += 1
        self.metrics.prompt_tokens += n_prompt
        self.metrics.generation_tokens += n_completion

    async def _stream(self, request: web.Request, body: dict[str, Any], fate: Fate, reply: rules.Reply,
                      n_prompt: int, n_completion: int) -> web.StreamResponse:
        config = self.config
        factor = fate.latency_factor
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})
        await response.prepare(request)
        head = {"id": f"chatcmpl-sim{config.seed}-{fate.index}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": body["model"]}

        async def send(delta: dict[str, Any], finish: str | None = None) -> None:
            chunk = {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                          "finish_reason": finish}]}
            await response.write(b"data: " + _dumps(chunk).encode() + b"\n\n")

        first_ms = (config.latency_ms + config.prefill_ms_per_token * n_prompt) * factor
        if first_ms > 0:
            await asyncio.sleep(first_ms / 1000.0)
        await send({"role": "assistant", "content": ""})
        text = reply.content or ""
        if text:
            step = max(1, -(-len(text) // _STREAM_PIECES))
            for start in range(0, len(text), step):
                piece = text[start:start + step]
                decode_ms = config.decode_ms_per_token * rules.estimate_tokens(piece) * factor
                if decode_ms > 0:
                    await asyncio.sleep(decode_ms / 1000.0)
                await send({"content": piece})
        for i, call in enumerate(self._tool_calls(fate, reply)):
            decode_ms = config.decode_ms_per_token * rules.estimate_tokens(call["function"]["arguments"])
            if decode_ms > 0:
                await asyncio.sleep(decode_ms * factor / 1000.0)
            await send({"tool_calls": [{"index": i, **call}]})
        await send({}, reply.finish_reason)
        options = body.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage"):
            usage = {"prompt_tokens": n_prompt, "total_tokens": n_prompt + n_completion,
                     "completion_tokens": n_completion}
            await response.write(b"data: " + _dumps({**head, "choices": [], "usage": usage}).encode()
                                 + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        self._count_success(reply, n_prompt, n_completion)
        return response


async def _serve(config: SimConfig) -> None:
    log.info("simllm starting: model=%s port=%d host=%s CUDA_VISIBLE_DEVICES=%s startup_delay_s=%g",
             config.model, config.port, config.host, os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>"),
             config.startup_delay_s)
    # Like vLLM, a replica needs startup_delay_s from process start (its imports count toward it).
    remaining = config.startup_delay_s - (time.time() - psutil.Process().create_time())
    if remaining > 0:
        await asyncio.sleep(remaining)
    server = SimEngine(config)
    runner = web.AppRunner(server.app(), access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, config.host, config.port, backlog=4096, shutdown_timeout=1.0)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise LaunchError(f"cannot listen on {config.host}:{config.port}: {exc.strerror or exc}") from exc
    log.info("simllm serving on http://%s:%d", config.host, config.port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("simllm stopping")
    await runner.cleanup()


def serve(config: SimConfig) -> None:
    """Run the simulated engine in the foreground until SIGTERM/SIGINT (or --crash-after).

    On uvloop when it is installed: about 20 % less CPU per request than asyncio's own loop
    (bench/bench_ops_bench.py), so that a sim is never what limits a benchmark of the client.
    """
    try:
        import uvloop
    except ImportError:
        asyncio.run(_serve(config))
        return
    uvloop.run(_serve(config))
