"""Pinning a unit of work to one rank of vLLM's internal data parallelism (`X-data-parallel-rank`).

A model served with `data_parallel.mode: vllm-internal` is one endpoint in front of N engine ranks, and
vLLM's own balancer spreads requests over them; vLLM reuses the KV of a prompt prefix only on the rank
that computed it. So, like session affinity across replicas, every call of one unit of work (a task)
carries the same rank in `X-data-parallel-rank` (vLLM's per-request header), chosen by a stable hash of
its session key: the same key gives the same rank in every process, so a resumed run pins where the
first did. Calls outside a unit of work carry no header and vLLM balances them.

The session key is the pool's session key where the client has one (the replica pool's session affinity,
client/affinity.py on the `affinity` branch: `session_key` is the one place to read it from once that
lands); today it is the running task's id (callctx.current_task).
"""

from __future__ import annotations

import hashlib

from orchestra_ops.client.callctx import current_task

RANK_HEADER = "X-data-parallel-rank"


def stable_hash(text: str) -> int:
    """A 64-bit hash that is the same in every process (the ring of client/affinity.py uses the same)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def rank_for(session: str, ranks: int) -> int:
    """The rank of `ranks` a session's calls go to."""
    if ranks < 1:
        raise ValueError(f"ranks {ranks} must be >= 1")
    return stable_hash(session) % ranks


def session_key() -> str | None:
    """The session of the call being made: its unit of work, or None outside one."""
    task = current_task.get()
    return None if task is None else str(task)


def rank_headers(ranks: int, session: str | None = None) -> dict[str, str]:
    """`{X-data-parallel-rank: r}` for a call of `session` (default: the current one) to an endpoint of
    `ranks` internal DP ranks; empty when there is nothing to pin (one rank, or no session)."""
    key = session if session is not None else session_key()
    if ranks <= 1 or key is None:
        return {}
    return {RANK_HEADER: str(rank_for(key, ranks))}
