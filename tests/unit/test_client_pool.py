"""ReplicaPool: least outstanding, per-replica cap, ejection + probe, bounded wait when all are down."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest

from orchestra_ops.client.call_errors import CallError, TransportError
from orchestra_ops.client.chat import ModelClient
from orchestra_ops.client.pool import ReplicaPool
from orchestra_ops.client.replica import Replica
from orchestra_ops.client.retry import RetryPolicy
from orchestra_ops.client.transport import Response

OK_BODY = b'{"choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}'


class FakeTransport:
    """Replicas whose address is in `dead` refuse connections; /health answers `health[address]`."""

    def __init__(self) -> None:
        self.dead: set[str] = set()
        self.health: dict[str, int] = {}
        self.posts: list[str] = []

    async def post(self, replica: Replica, url: str, body: bytes, headers: Mapping[str, str],
                   timeout: float) -> Response:
        self.posts.append(replica.address)
        await asyncio.sleep(0)
        if replica.address in self.dead:
            raise TransportError("connection", f"{replica.address}: connection refused")
        return Response(200, {}, OK_BODY)

    async def get(self, replica: Replica, url: str, timeout: float) -> Response:
        if replica.address in self.dead:
            raise TransportError("connection", f"{replica.address}: connection refused")
        return Response(self.health.get(replica.address, 200), {}, b"")

    async def close(self) -> None:
        pass


def replicas(n: int, cap: int = 4) -> list[Replica]:
    return [Replica.for_server("10.0.0.1", 8000 + i, cap) for i in range(n)]


def test_least_outstanding_and_round_robin_when_idle() -> None:
    async def main() -> None:
        pool = ReplicaPool("m", replicas(3), FakeTransport())
        held = [await pool.acquire() for _ in range(6)]
        assert sorted(r.outstanding for r in pool.replicas) == [2, 2, 2]
        pool.release(held[0], "ok")
        nxt = await pool.acquire()
        assert nxt is held[0]  # the one with fewest outstanding
    asyncio.run(main())


def test_per_replica_cap_makes_requests_wait() -> None:
    async def main() -> None:
        pool = ReplicaPool("m", replicas(2, cap=2), FakeTransport())
        held = [await pool.acquire() for _ in range(4)]
        waiter = asyncio.ensure_future(pool.acquire())
        await asyncio.sleep(0.01)
        assert not waiter.done()
        assert max(r.outstanding for r in pool.replicas) == 2
        pool.release(held[1], "ok")
        assert await asyncio.wait_for(waiter, 1) is held[1]
    asyncio.run(main())


def test_a_refusing_replica_is_ejected_and_its_request_retried_elsewhere() -> None:
    async def main() -> None:
        transport = FakeTransport()
        pool = ReplicaPool("m", replicas(2), transport, probe_interval_s=0.01)
        dead = pool.replicas[0]
        transport.dead.add(dead.address)
        client = ModelClient(name="m", served_name="m", pool=pool, request_timeout_s=1,
                             retry=RetryPolicy(attempts=3, backoff_base_s=0.001))
        results = [await client.chat([{"role": "user", "content": "q"}]) for _ in range(5)]
        assert all(r.replica == pool.replicas[1].address for r in results)
        assert not dead.healthy and transport.posts.count(dead.address) == 1
        transport.dead.clear()  # it comes back: the probe re-admits it
        for _ in range(100):
            await asyncio.sleep(0.01)
            if dead.healthy:
                break
        assert dead.healthy
        await pool.close()
    asyncio.run(main())


def test_when_all_replicas_are_down_requests_wait_then_fail_clearly() -> None:
    async def main() -> None:
        transport = FakeTransport()
        pool = ReplicaPool("m", replicas(2), transport, unavailable_wait_s=0.2, probe_interval_s=0.05)
        transport.dead.update(r.address for r in pool.replicas)
        client = ModelClient(name="m", served_name="m", pool=pool, request_timeout_s=1,
                             retry=RetryPolicy(attempts=5, backoff_base_s=0.001))
        with pytest.raises(CallError) as info:
            await client.chat([{"role": "user", "content": "q"}])
        assert info.value.kind == "no_replica"
        assert "all 2 replica(s) of 'm' are down" in info.value.message
        assert "10.0.0.1:8000: 10.0.0.1:8000: connection refused" in info.value.message
        await pool.close()
    asyncio.run(main())


def test_a_replica_that_comes_back_within_the_wait_serves_the_waiting_request() -> None:
    async def main() -> None:
        transport = FakeTransport()
        pool = ReplicaPool("m", replicas(1), transport, unavailable_wait_s=5, probe_interval_s=0.02)
        transport.dead.add(pool.replicas[0].address)
        client = ModelClient(name="m", served_name="m", pool=pool, request_timeout_s=1,
                             retry=RetryPolicy(attempts=3, backoff_base_s=0.001))
        call = asyncio.ensure_future(client.chat([{"role": "user", "content": "q"}]))
        await asyncio.sleep(0.1)
        assert not call.done()
        transport.dead.clear()
        result = await asyncio.wait_for(call, 5)
        assert result.content == "ok"
        await pool.close()
    asyncio.run(main())


def test_5xx_ejects_only_after_consecutive_failures() -> None:
    async def main() -> None:
        pool = ReplicaPool("m", replicas(2), FakeTransport(), eject_after=3)
        replica = pool.replicas[0]
        for outcome in ("fail", "fail", "ok", "fail", "fail", "busy"):
            replica.outstanding += 1
            pool.release(replica, outcome)  # type: ignore[arg-type]
        assert replica.healthy
        replica.outstanding += 1
        pool.release(replica, "fail", "500")
        assert not replica.healthy
        await pool.close()
    asyncio.run(main())
