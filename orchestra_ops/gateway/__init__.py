"""`ops gateway`: one OpenAI-compatible URL over the whole fleet, for harnesses that are not ours.

    server.py    HTTP/1.1 server (asyncio.Protocol + httptools): keep-alive, streaming, flow control
    app.py       the routes: inference by the body's `model`, /v1/models, /health, /metrics, auth
    forward.py   one request to a replica of its target: retries only before the first byte
    upstream.py  keep-alive connections to the replicas, answers read as they arrive (upstream_https.py:
                 providers over aiohttp)
    body.py      the affinity key of a request, a target's request_defaults merged in
    calllog.py   the request log's line
    metrics.py   Prometheus text
    source.py    what it routes to (a topology that is up, or an endpoints file), re-read on change
    run.py       `ops serve gateway`: checks, request log (profile.jsonl), signals

It is the engine's ReplicaPool behind an HTTP face (client/pool.py): least-loaded, ejection and
background re-probe, the load bound; only what the topology declares is reachable.
"""
