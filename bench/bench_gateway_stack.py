"""Which HTTP server stack the gateway stands on: the same trivial handler (answer a fixed chat completion
to every POST, no upstream) on three stacks, each a process of its own on uvloop, driven by `ops bench`
(concurrency 128, keep-alive), measured by the server process's CPU per request:

    ops gateway server   orchestra_ops/gateway/server.py (asyncio.Protocol + httptools)
    aiohttp low-level    aiohttp.web.Server (no router, no middlewares: aiohttp at its leanest)
    uvicorn raw ASGI     uvicorn with http=httptools, loop=uvloop, a bare ASGI callable (no framework)

The handler reads the whole body (as the gateway must, to route by `model`) and answers ~300 bytes.
Each stack runs BENCH_STACK_RUNS times (default 2), alternating, on a machine other engineers share:
compare CPU per request within one run of this file. Never asserts; returns 0.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from bench.bench_gateway import _start, _tree_cpu
from bench.bench_ops_bench import run_ops_bench
from bench.tables import table
from tests.helpers import REPO, free_port, kill_tree

REQUESTS = int(os.environ.get("BENCH_STACK_REQUESTS", "5000"))
RUNS = int(os.environ.get("BENCH_STACK_RUNS", "2"))
CONCURRENCY = 128
ANSWER = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "a fixed answer"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}})

SERVERS = {
    "ops gateway server": """
        import asyncio, sys, uvloop
        from orchestra_ops.gateway.server import HttpServer
        ANSWER = sys.argv[2].encode()
        async def handle(request, reply):
            if request.path == "/health":
                reply.send(200, [], b"")
            else:
                reply.send(200, [("content-type", "application/json")], ANSWER)
        async def main():
            server = HttpServer(handle)
            await server.start("127.0.0.1", int(sys.argv[1]))
            await asyncio.Event().wait()
        uvloop.run(main())
        """,
    "aiohttp low-level": """
        import asyncio, sys, uvloop
        from aiohttp import web
        ANSWER = sys.argv[2].encode()
        async def handle(request):
            await request.read()
            if request.path == "/health":
                return web.Response(status=200)
            return web.Response(body=ANSWER, content_type="application/json")
        async def main():
            server = web.Server(handle)
            runner = web.ServerRunner(server)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", int(sys.argv[1]), backlog=2048).start()
            await asyncio.Event().wait()
        uvloop.run(main())
        """,
    "uvicorn raw ASGI": """
        import sys, uvicorn
        ANSWER = sys.argv[2].encode()
        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            more = True
            while more:
                message = await receive()
                more = message.get("more_body", False)
            body = b"" if scope["path"] == "/health" else ANSWER
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), http="httptools", loop="uvloop",
                    log_level="warning", access_log=False, backlog=2048)
        """,
}


def main() -> int:
    print(f"load average before: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()})")
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        for run in range(1, RUNS + 1):
            for name, code in SERVERS.items():
                script = tmp / f"{name.replace(' ', '_')}.py"
                script.write_text(textwrap.dedent(code))
                port = free_port()
                env = {"PYTHONPATH": str(REPO)}
                proc = _start([sys.executable, str(script), str(port), ANSWER], f"http://127.0.0.1:{port}/health",
                              tmp / f"{script.stem}.log", env)
                try:
                    config = tmp / "one.json"
                    config.write_text(json.dumps({"m": [{"ip_addr": "127.0.0.1", "port": port}]}))
                    run_ops_bench(config, 32, 300)  # warm
                    cpu0 = _tree_cpu(proc.pid)
                    started = time.perf_counter()
                    result, _ = run_ops_bench(config, CONCURRENCY, REQUESTS)
                    wall = time.perf_counter() - started
                    cpu = _tree_cpu(proc.pid) - cpu0
                finally:
                    kill_tree(proc.pid)
                rows.append([str(run), name, f"{cpu / REQUESTS * 1e6:.0f}", f"{result['req_per_s']:,.0f}",
                             f"{wall:.1f}", json.dumps(result["errors"]), f"{os.getloadavg()[0]:.1f}"])
    table(f"server stacks: a fixed answer to every POST, ops bench --concurrency {CONCURRENCY} --requests "
          f"{REQUESTS:,}", ["run", "stack", "server CPU us/req", "req/s", "wall s", "errors", "load 1 min"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
