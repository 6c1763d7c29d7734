"""The HTTP face: POST /retrieve (ToolOrchestra's shape), GET /health, GET /metrics.

Request:  {"queries": ["…", …], "topk": 3, "return_scores": true, "eid": "…"}
Response: one list per query, best first: [[{"document": {"id": …, "content": …, …}, "score": 0.83}, …], …]
(without "score" when return_scores is false). Malformed requests get 422 naming the field; a full
queue gets 503 with Retry-After.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from .batcher import Dispatcher, DispatcherClosed, QueueFull
from .metrics import ServerMetrics
from .search import ExampleFilter, Hit, Query, UnknownEid

log = logging.getLogger(__name__)

MAX_TOPK = 1000
RETRY_AFTER_S = 1


class RetrieveRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    queries: list[StrictStr]
    topk: Annotated[StrictInt, Field(ge=1, le=MAX_TOPK)] = 3
    return_scores: StrictBool = False
    eid: StrictStr | StrictInt | None = None


@dataclass
class ServerState:
    """What the handlers need; `ready` turns true once the index is loaded and the encoder warmed up."""

    dispatcher: Dispatcher
    metrics: ServerMetrics
    examples: ExampleFilter | None
    info: dict[str, Any]
    ready: bool = False


def create_app(state: ServerState) -> FastAPI:
    app = FastAPI(title="orchestra-ops retrieval", docs_url=None, redoc_url=None, openapi_url=None)
    state.metrics.queue_depth = lambda: state.dispatcher.queue_depth
    state.metrics.queued_queries = lambda: state.dispatcher.queued_queries

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        state.metrics.count_response(422)
        return _unprocessable(
            [
                {"loc": list(err.get("loc", ())), "msg": str(err.get("msg", "")), "type": str(err.get("type", ""))}
                for err in exc.errors()
            ]
        )

    @app.post("/retrieve")
    async def retrieve(body: RetrieveRequest) -> Response:
        start = time.perf_counter()
        try:
            allowed = state.examples.rows_for(body.eid) if state.examples is not None else None
        except UnknownEid as exc:
            state.metrics.count_response(422)
            return _unprocessable(
                [
                    {
                        "loc": ["body", "eid"],
                        "msg": f"unknown eid {exc.args[0]!r} (not in the examples file)",
                        "type": "value_error",
                    }
                ]
            )
        if not body.queries:
            state.metrics.count_response(200)
            return Response(b"[]", media_type="application/json")
        queries = [Query(text, body.topk, allowed) for text in body.queries]
        try:
            results = await asyncio.wrap_future(state.dispatcher.submit(queries))
        except (QueueFull, DispatcherClosed) as exc:
            state.metrics.count_response(503)
            return JSONResponse({"detail": str(exc)}, status_code=503, headers={"Retry-After": str(RETRY_AFTER_S)})
        payload = [[_render(hit, body.return_scores) for hit in hits] for hits in results]
        content = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        state.metrics.latency.observe(time.perf_counter() - start)
        state.metrics.count_response(200)
        return Response(content, media_type="application/json")

    @app.get("/health")
    async def health() -> JSONResponse:
        if not state.ready:
            return JSONResponse({"status": "starting"}, status_code=503)
        if not state.dispatcher.is_alive():
            return JSONResponse({"status": "worker stopped"}, status_code=503)
        return JSONResponse({"status": "ok", **state.info})

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(state.metrics.render(), media_type="text/plain; version=0.0.4")

    return app


def _render(hit: Hit, with_score: bool) -> dict[str, Any]:
    if with_score:
        return {"document": hit.document, "score": hit.score}
    return {"document": hit.document}


def _unprocessable(errors: list[dict[str, Any]]) -> JSONResponse:
    summary = "; ".join(f"{_field(err['loc'])}: {err['msg']}" for err in errors)
    return JSONResponse({"detail": errors, "error": summary}, status_code=422)


def _field(loc: list[Any]) -> str:
    """`queries.1`, `topk`; `body` for an error about the body as a whole (not JSON, not an object)."""
    path = loc[1:] if loc[:1] == ["body"] else loc
    if not path or not isinstance(path[0], str):
        return "body"
    return ".".join(str(part) for part in path)
