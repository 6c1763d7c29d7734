"""A retrieval stand-in for the agent benchmark: POST /retrieve answers the first `topk` documents of
a corpus after a fixed delay (the seed run's retrieval time scaled down), GET /health answers 200.

The real `ops serve retrieval` encodes every query on the CPU; on the benchmark's 2 shared cores
that would compete with the process measured. Usage: python -m bench.retrieval_standin PORT DELAY_MS CORPUS
"""

from __future__ import annotations

import asyncio
import json
import sys

from aiohttp import web


def main() -> None:
    port, delay_ms, corpus = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    with open(corpus, encoding="utf-8") as handle:
        docs = [json.loads(line) for line in handle if line.strip()]

    async def retrieve(request: web.Request) -> web.Response:
        body = await request.json()
        await asyncio.sleep(delay_ms / 1000)
        hits = [{"document": doc, "score": 1.0 - i / 1000} for i, doc in enumerate(docs[: int(body["topk"])])]
        return web.json_response([hits])

    async def health(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    app = web.Application()
    app.router.add_post("/retrieve", retrieve)
    app.router.add_get("/health", health)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


if __name__ == "__main__":
    main()
