"""The HTTP server of the simulated engine (aiohttp.web, minimal work per request), vLLM 0.32 on the
wire (wire.py; tests/integration/test_sim_conformance.py holds it to a real vLLM).

Endpoints: `GET /health` (200, empty), `GET /version`, `GET /v1/models` (the served name with
`max_model_len`, then the LoRA adapters), `POST /v1/chat/completions` (JSON, or SSE with
`stream: true` (chat_stream.py); the usage chunk comes when `stream_options.include_usage` is true or with
--enable-force-include-usage, as in vLLM), `GET /metrics` (Prometheus text, metrics.py),
`POST /tokenize` and `POST /detokenize` (tokenize_routes.py).

Order of work for a chat request: it draws its Fate (faults.py); a body that is not a JSON object
with a `messages` list is a 400; a `model` other than the served name or an adapter (lora.py) is
vLLM's 404 (no `model` means the served one); max_tokens over max_model_len is a 400, and so is a
prompt over max_model_len ("This model's maximum context length is …", in vLLM's two forms); a
prompt that fits is never refused for its max_tokens: the answer is cut to what is left (as vLLM
0.32 clamps), finish_reason "length". Then an injected error status (429 with Retry-After), a hang
(never answered; cancelled when the client goes), or the answer (rules.py) after
`(latency_ms + prefill_ms_per_token * uncached_prompt_tokens + decode_ms_per_token * completion_tokens
* (1 + decode_slowdown * (requests_in_flight - 1))) * latency_factor` ms, where the uncached prompt
tokens are those its prefix cache (prefix_cache.py, `prefix_cache_tokens` of capacity) did not hold,
as vLLM computes only those, and the requests in flight are counted when the request arrives.
A streamed answer is written by chat_stream.py (ChatAnswer, vLLM's SSE chunks and their pacing).

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
from dataclasses import replace
from typing import Any

import psutil
from aiohttp import web
from orchestra_ops.services.simllm import lora, replies, rules, wire
from orchestra_ops.services.simllm.chat_stream import ChatAnswer, stream_answer
from orchestra_ops.services.simllm.config import SimConfig
from orchestra_ops.services.simllm.faults import Fate, FaultPlan
from orchestra_ops.services.simllm.metrics import SimMetrics
from orchestra_ops.services.simllm.prefix_cache import BLOCK_TOKENS, PrefixCache
from orchestra_ops.services.simllm.tokenize_routes import add_routes as add_tokenize_routes

from orchestra_ops.errors import LaunchError

log = logging.getLogger(__name__)


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    """vLLM's error body: `{"error": {"message", "type", "param", "code"}}` (wire.py)."""
    return wire.error_response(status, message, headers=headers)


class SimEngine:
    """One simulated replica: the request handlers and their state."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.faults = FaultPlan(config)
        self.metrics = SimMetrics(config.model, config.max_model_len, lora=config.enable_lora,
                                  max_loras=config.max_loras)
        self.prefix_cache = PrefixCache(config.prefix_cache_tokens // BLOCK_TOKENS)
        self._created = int(time.time())
        self.adapters = lora.AdapterTable(config)
        retry = config.retry_after_s
        self._retry_after = str(int(retry)) if retry == int(retry) else f"{retry:g}"

    def app(self) -> web.Application:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_get("/health", self.health)
        app.router.add_get("/version", self.version)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/metrics", self.metrics_text)
        app.router.add_post("/v1/chat/completions", self.chat)
        lora.add_routes(app, self.adapters)
        add_tokenize_routes(app, self.config, self.adapters)  # /tokenize, /detokenize (tokenize_routes.py)
        return app

    async def health(self, request: web.Request) -> web.Response:
        return web.Response()

    async def version(self, request: web.Request) -> web.Response:
        return web.Response(text=wire.dumps({"version": wire.VLLM_VERSION}), content_type=wire.JSON)

    async def models(self, request: web.Request) -> web.Response:
        base = wire.model_card(self.config.model, self.config.model, None, self.config.max_model_len,
                               int(time.time()))
        body = {"object": "list", "data": [base, *self.adapters.cards()]}
        return web.Response(text=wire.dumps(body), content_type=wire.JSON)

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

    def _limits_error(self, body: dict[str, Any], n_chars: int, n_prompt: int) -> web.Response | None:
        """vLLM's 400 for max_tokens over max_model_len or a prompt over it, else None."""
        limit = self.config.max_model_len
        max_tokens = _max_tokens(body)
        if max_tokens is not None and max_tokens > limit:
            return wire.error_response(
                400, f"max_tokens={max_tokens} cannot be greater than max_model_len={limit}. Please request "
                f"fewer output tokens. (parameter=max_tokens, value={max_tokens})", param="max_tokens")
        return self._context_error(n_chars, n_prompt)

    async def _answer(self, request: web.Request, fate: Fate) -> web.StreamResponse:
        config = self.config
        metrics = self.metrics
        try:
            body = json.loads(await request.read())
        except ValueError as exc:
            metrics.failed[400] += 1
            return wire.error_response(400, f"request body is not valid JSON: {exc}", param="body",
                                       error_type=wire.VALIDATION_ERROR)
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            metrics.failed[400] += 1
            return wire.error_response(400, "1 validation error: 'messages' must be a list of messages",
                                       param="body.messages", error_type=wire.VALIDATION_ERROR)
        persona = self.adapters.resolve(body.get("model"))
        if persona is None:
            metrics.failed[404] += 1
            return wire.unknown_model(body.get("model"), self.config.model)
        body["model"] = persona  # the rules answer as the model asked for (an adapter answers as itself)
        n_chars, n_prompt = replies.prompt_size(body)
        refused = self._limits_error(body, n_chars, n_prompt)
        if refused is not None:
            metrics.failed[400] += 1
            return refused
        if fate.status is not None:
            metrics.failed[fate.status] += 1
            headers = {"Retry-After": self._retry_after} if fate.status == 429 else None
            return error_response(fate.status, f"simulated failure ({fate.status})", headers)
        if fate.hang and fate.index != config.crash_after:
            metrics.hung += 1
            await asyncio.Future()
        answer = self._compose(body, persona, fate, n_prompt)
        metrics.tokens_in_flight += n_prompt + answer.n_completion
        try:
            if body.get("stream"):
                return await self._stream(request, body, fate, answer)
            delay_ms = (config.latency_ms + config.prefill_ms_per_token * answer.uncached
                        + config.decode_ms_per_token * answer.n_completion * answer.decode_factor) * fate.latency_factor
            if delay_ms > 0:
                await asyncio.sleep(delay_ms / 1000.0)
            reply = answer.reply
            payload = wire.completion(self._request_id(fate), persona,
                                      wire.message(reply.content or "", self._tool_calls(fate, reply)),
                                      reply.finish_reason,
                                      wire.usage(n_prompt, answer.n_completion, answer.details))
            self._count_success(answer)
            return web.Response(text=wire.dumps(payload), content_type=wire.JSON)
        finally:
            metrics.tokens_in_flight -= n_prompt + answer.n_completion

    def _compose(self, body: dict[str, Any], persona: str, fate: Fate, n_prompt: int) -> ChatAnswer:
        """The rules' reply, as this replica serves it: adapter, malformed judge, named tool choice,
        cut to max_tokens or the context; plus the prefix-cache hits of its prompt."""
        reply = rules.respond(body)
        if self.adapters.is_adapter(persona):
            reply = lora.adapter_reply(reply, persona)
        if reply.judge and fate.malformed:
            self.metrics.malformed += 1
            reply = replies.malformed(reply)
        if reply.tool_calls and isinstance(body.get("tool_choice"), dict):
            reply = replace(reply, finish="stop")  # vLLM: a named tool_choice ends with "stop"
        budget = self.config.max_model_len - n_prompt
        max_tokens = _max_tokens(body)
        if max_tokens is not None:
            budget = min(budget, max_tokens)
        reply = replies.fit(reply, max(1, budget))
        cached = created = 0
        if n_prompt >= BLOCK_TOKENS:  # shorter prompts fill no block: skip building their key
            cached, created = self.prefix_cache.admit(replies.prompt_key(body), n_prompt)
        self.metrics.prefix_queries += n_prompt
        self.metrics.prefix_hits += cached
        details = wire.prompt_details(cached, created) if self.config.enable_prompt_tokens_details else None
        slowdown = 1.0 + self.config.decode_slowdown * max(0, self.metrics.in_flight - 1)
        return ChatAnswer(persona, reply, n_prompt, replies.completion_tokens(reply), details, cached, slowdown)

    def _request_id(self, fate: Fate) -> str:
        return f"chatcmpl-sim{self.config.seed}-{fate.index}"

    def _context_error(self, n_chars: int, n_prompt: int) -> web.Response | None:
        """vLLM 0.32's 400 for a prompt over max_model_len, in its two forms: a prompt of more than 16
        characters per allowed token is refused on its characters, any other on its tokens. A prompt
        that fits is never refused for its max_tokens: the answer is cut instead (`_compose`)."""
        limit = self.config.max_model_len
        head = f"This model's maximum context length is {limit} tokens. However, your prompt contains "
        if n_chars > 16 * limit:
            return wire.error_response(
                400, f"{head}{n_chars} characters (more than {16 * limit} characters, which is the upper bound "
                f"for {limit} input tokens). Please reduce the length of the input prompt. "
                f"(parameter=input_text, value={n_chars})", param="input_text")
        if n_prompt > limit:
            return wire.error_response(
                400, f"{head}at least {limit + 1} input tokens, which exceeds this limit even without any "
                f"output tokens. Please reduce the length of the input prompt. (parameter=input_tokens, "
                f"value={limit + 1})", param="input_tokens")
        return None

    def _tool_calls(self, fate: Fate, reply: replies.Reply) -> list[dict[str, Any]]:
        return [{"id": f"chatcmpl-tool-{fate.index}-{i}", "type": "function",
                 "function": {"name": call["name"], "arguments": call["arguments"]}}
                for i, call in enumerate(reply.tool_calls)]

    def _count_success(self, answer: ChatAnswer) -> None:
        finish = answer.reply.finish_reason  # the engine's reason: a tool call is a "stop" to it
        self.metrics.success["stop" if finish == "tool_calls" else finish] += 1
        self.metrics.prefill_tokens += answer.uncached
        self.metrics.decode_ms += self.config.decode_ms_per_token * answer.n_completion * answer.decode_factor
        self.metrics.prompt_tokens += answer.n_prompt
        self.metrics.generation_tokens += answer.n_completion

    async def _stream(self, request: web.Request, body: dict[str, Any], fate: Fate,
                      answer: ChatAnswer) -> web.StreamResponse:
        """vLLM's SSE stream (chat_stream.py), then the answer counted as a success."""
        response = await stream_answer(request, body, self.config, answer, self._request_id(fate),
                                       fate.latency_factor, self._tool_calls(fate, answer.reply))
        self._count_success(answer)
        return response


def _max_tokens(body: dict[str, Any]) -> int | None:
    """The request's output limit (vLLM: max_completion_tokens, else max_tokens), None when unset."""
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


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
