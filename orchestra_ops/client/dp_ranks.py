"""Pinning a session to one rank of vLLM's internal data parallelism (`X-data-parallel-rank`).

A model served with `data_parallel.mode: vllm-internal` is one endpoint in front of N engine ranks, and
vLLM's own balancer spreads requests over them; vLLM reuses the KV of a prompt prefix only on the rank
that computed it. So, like session affinity across replicas (client/affinity.py), every call of one
session (the pool's session key: a task, a tau2 side, a HealthBench example) carries the same rank in
`X-data-parallel-rank` (vLLM's per-request header), chosen by the stable hash the affinity ring uses:
the same key gives the same rank in every process, so a resumed run pins where the first did.

ModelClient adds the header exactly where it sends `x-session-id`: a call with a session key to a pool
whose affinity is on (`routing.affinity: session`, the default; `ops eval --affinity none` turns both
off). Calls without a session carry no header and vLLM balances them.
"""

from __future__ import annotations

from orchestra_ops.client.affinity import stable_hash

RANK_HEADER = "X-data-parallel-rank"


def rank_for(session: str, ranks: int) -> int:
    """The rank of `ranks` a session's calls go to."""
    if ranks < 1:
        raise ValueError(f"ranks {ranks} must be >= 1")
    return stable_hash(session) % ranks


def rank_headers(ranks: int, session: str | None) -> dict[str, str]:
    """`{X-data-parallel-rank: r}` for a call of `session` to an endpoint of `ranks` internal DP ranks;
    empty when there is nothing to pin (one rank, or no session)."""
    if ranks <= 1 or session is None:
        return {}
    return {RANK_HEADER: str(rank_for(session, ranks))}
