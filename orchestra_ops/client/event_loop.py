"""`run(coro)`: asyncio.run on uvloop when it is installed (the stdlib loop otherwise).

uvloop does the event loop and socket transports in C: at concurrency 256 against 4 sim replicas
it takes ~10-15 % off the client's CPU per call (bench/bench_ops_bench.py), and the sim serves on
it too (services/simllm/app.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)
