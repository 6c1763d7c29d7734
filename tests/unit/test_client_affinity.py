"""Session affinity with bounded loads in the ReplicaPool (client/affinity.py)."""

from __future__ import annotations

import asyncio
import math
import os
import subprocess
import sys
from collections import Counter

import pytest

from orchestra_ops.client.affinity import Affinity, HashRing, Move, SessionAffinity, session_header, stable_hash
from orchestra_ops.client.chat import ModelClient
from orchestra_ops.client.pool import ReplicaPool
from orchestra_ops.client.replica import Replica
from orchestra_ops.client.retry import RetryPolicy
from tests.unit.test_client_pool import FakeTransport, replicas


def pool_of(n: int, cap: int = 64, mode: str = "session", load_factor: float = 1.25) -> ReplicaPool:
    return ReplicaPool("m", replicas(n, cap), FakeTransport(), probe_interval_s=0.01,
                       affinity=Affinity(mode, load_factor))  # type: ignore[arg-type]


def home(pool: ReplicaPool, key: str) -> Replica:
    """The replica the ring gives `key` when nothing is loaded."""
    assert pool.sessions is not None
    return pool.replicas[next(pool.sessions.ring.order(key))]


def keys_homed_on(pool: ReplicaPool, replica: Replica, count: int) -> list[str]:
    found = [k for k in (f"task-{i}" for i in range(5000)) if home(pool, k) is replica]
    assert len(found) >= count
    return found[:count]


def test_one_sessions_calls_all_land_on_one_replica() -> None:
    async def main() -> None:
        pool = pool_of(4)
        other = [await pool.acquire(session=f"other-{i}") for i in range(7)]  # load elsewhere, held
        seen = set()
        for _ in range(30):
            replica = await pool.acquire(session="task-1")
            seen.add(replica.address)
            pool.release(replica, "ok")
        assert seen == {home(pool, "task-1").address}
        assert pool.sessions is not None and pool.sessions.moves == 0
        for replica in other:
            pool.release(replica, "ok")
    asyncio.run(main())


def test_the_bound_holds_under_a_skewed_key_set() -> None:
    """40 sessions that all hash to one replica, all in flight at once: no replica ever holds more
    than ceil(1.25 * mean) with the call placed, and the hot one fills exactly to the final bound."""
    async def main() -> None:
        pool = pool_of(4)
        hot = pool.replicas[0]
        keys = keys_homed_on(pool, hot, 40)
        for placed, key in enumerate(keys, 1):
            replica = await pool.acquire(session=key)
            bound = math.ceil(1.25 * placed / 4)
            assert replica.outstanding <= bound, (placed, replica.address, replica.outstanding)
            assert max(r.outstanding for r in pool.replicas) <= bound
        assert hot.outstanding == math.ceil(1.25 * 40 / 4) == 13
        assert sum(r.outstanding for r in pool.replicas) == 40
        assert pool.sessions is not None and pool.sessions.moves == 0  # first placements are not moves
    asyncio.run(main())


def test_a_session_over_the_bound_or_at_its_cap_moves_once_and_stays() -> None:
    pool = pool_of(2)
    table = pool.sessions
    assert table is not None
    r0, r1 = pool.replicas
    a, b = keys_homed_on(pool, r0, 2)
    assert table.pick(a) == (r0, None)
    r0.outstanding = 2  # with a's call placed: 3 > ceil(1.25 * 3 / 2) = 2
    assert table.bound() == 2
    assert table.pick(a) == (r1, Move(a, r0.address, r1.address, "over_bound"))
    r0.outstanding = 0
    assert table.pick(a) == (r1, None)  # idle again: a stays where it went
    assert table.pick(b) == (r0, None)
    r1.outstanding = r0.outstanding = 1
    assert table.pick(b) == (r0, None)  # 2 <= ceil(1.25 * 3 / 2) = 2: within the bound, it stays
    r0.cap = 1
    assert table.pick(b) == (r1, Move(b, r0.address, r1.address, "at_cap"))
    assert table.moves == 2


def test_an_ejected_replicas_sessions_move_once_and_stay_where_they_moved() -> None:
    async def main() -> None:
        pool = pool_of(4)
        moves: list[Move] = []
        pool.on_move = lambda name, move: moves.append(move)
        keys = [f"task-{i}" for i in range(60)]
        placed = {}
        for key in keys:
            replica = await pool.acquire(session=key)
            placed[key] = replica
            pool.release(replica, "ok")
        assert all(placed[k] is home(pool, k) for k in keys)  # idle pool: every session where its hash is
        dead = pool.replicas[2]
        on_dead = [k for k in keys if placed[k] is dead]
        assert 5 <= len(on_dead) <= 30
        dead.outstanding += 1
        pool.release(dead, "down", "connection refused")  # ejected (its probe keeps it out: it is dead)
        transport = pool.transport
        assert isinstance(transport, FakeTransport)
        transport.dead.add(dead.address)
        assert not dead.healthy
        after = {}
        for _ in range(3):
            for key in keys:
                replica = await pool.acquire(session=key)
                after[key] = replica
                pool.release(replica, "ok")
        assert [m.session for m in moves] == on_dead  # each moved exactly once
        assert all(m.reason == "ejected" and m.source == dead.address for m in moves)
        assert all(after[k] is placed[k] for k in keys if k not in on_dead)
        assert all(after[k] is not dead and after[k].address == m.dest for k, m in zip(on_dead, moves, strict=True))
        transport.dead.clear()  # it comes back
        for _ in range(200):
            await asyncio.sleep(0.01)
            if dead.healthy:
                break
        assert dead.healthy
        for key in keys:
            replica = await pool.acquire(session=key)
            assert replica is after[key]  # moved sessions stay where they went
            pool.release(replica, "ok")
        new = [k for k in (f"new-{i}" for i in range(400)) if home(pool, k) is dead][:5]
        for key in new:
            replica = await pool.acquire(session=key)
            assert replica is dead  # the returning replica takes new sessions by hash
            pool.release(replica, "ok")
        assert len(moves) == len(on_dead)
        await pool.close()
    asyncio.run(main())


def test_a_retry_avoids_the_failed_replica_without_moving_the_session() -> None:
    async def main() -> None:
        transport = FakeTransport()
        pool = ReplicaPool("m", replicas(3), transport, eject_after=3)
        moves: list[Move] = []
        pool.on_move = lambda name, move: moves.append(move)
        first = await pool.acquire(session="t")
        pool.release(first, "fail", "500")  # one 5xx: not ejected
        retry = await pool.acquire(avoid=first, session="t")
        assert retry is not first and first.healthy
        pool.release(retry, "ok")
        assert await pool.acquire(session="t") is first and not moves
    asyncio.run(main())


def test_a_resumed_run_maps_its_sessions_by_the_same_hash() -> None:
    async def main() -> tuple[list[str], list[str]]:
        first, second = pool_of(4), pool_of(4)  # a new process builds a new pool over the same fleet
        out = []
        for pool in (first, second):
            chosen = []
            for i in range(200):
                replica = await pool.acquire(session=f"task-{i}")
                chosen.append(replica.address)
                pool.release(replica, "ok")
            out.append(chosen)
        return out[0], out[1]
    a, b = asyncio.run(main())
    assert a == b
    shares = Counter(a)
    assert len(shares) == 4 and max(shares.values()) <= 1.5 * 200 / 4  # the ring spreads sessions
    # and the hash does not depend on the process (PYTHONHASHSEED): the same in a fresh interpreter
    code = ("from orchestra_ops.client.affinity import HashRing;"
            "r = HashRing(['10.0.0.1:%d' % (8000 + i) for i in range(4)]);"
            "print(','.join('10.0.0.1:%d' % (8000 + next(r.order('task-%d' % i))) for i in range(200)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONHASHSEED": "12345"}).stdout.strip()
    assert out.split(",") == a


def test_the_ring_is_the_same_for_the_same_replicas() -> None:
    names = [f"10.0.0.1:{8000 + i}" for i in range(4)]
    first, second = HashRing(names), HashRing(list(names))
    assert [list(first.order(f"k{i}")) for i in range(50)] == [list(second.order(f"k{i}")) for i in range(50)]
    assert all(sorted(first.order(f"k{i}")) == [0, 1, 2, 3] for i in range(50))


def test_with_affinity_off_the_pool_picks_as_it_always_did() -> None:
    async def script(pool: ReplicaPool, with_keys: bool) -> list[str]:
        chosen: list[str] = []
        held: list[Replica] = []
        for i in range(40):
            replica = await pool.acquire(session=f"task-{i % 5}" if with_keys else None)
            chosen.append(replica.address)
            held.append(replica)
            if i % 3 == 2:
                pool.release(held.pop(0), "ok")
        return chosen

    async def main() -> None:
        off = await script(pool_of(4, mode="none"), with_keys=True)
        plain = await script(pool_of(4), with_keys=False)
        affine = await script(pool_of(4), with_keys=True)
        assert off == plain  # affinity "none": the session key changes nothing
        assert affine != plain
        assert pool_of(4, mode="none").sessions is None
    asyncio.run(main())


def test_ended_sessions_are_forgotten_and_the_table_is_bounded() -> None:
    async def main() -> None:
        pool = pool_of(4)
        assert pool.sessions is not None
        for i in range(50):
            replica = await pool.acquire(session=f"task-{i}")
            pool.release(replica, "ok")
            pool.end_session(f"task-{i}")
        assert len(pool.sessions) == 0
        table = SessionAffinity(replicas(2), max_sessions=10)
        for i in range(25):
            placed = table.pick(f"k{i}")
            assert placed is not None
        assert len(table) == 10 and table.where("k24") is not None and table.where("k0") is None
    asyncio.run(main())


def test_a_model_client_sends_the_session_to_its_pool() -> None:
    async def main() -> None:
        transport = FakeTransport()
        pool = ReplicaPool("m", replicas(4), transport)
        client = ModelClient(name="m", served_name="m", pool=pool, request_timeout_s=1,
                             retry=RetryPolicy(attempts=1))
        for _ in range(8):
            await client.chat([{"role": "user", "content": "q"}], session="task-7")
        assert set(transport.posts) == {home(pool, "task-7").address}
    asyncio.run(main())


def test_session_header_values() -> None:
    assert session_header("task-17") == "task-17"
    assert session_header("66fec7825e6051260840e060/agent") == "66fec7825e6051260840e060/agent"
    hashed = session_header("what is 2 + 2?")
    assert len(hashed) == 32 and all(c in "0123456789abcdef" for c in hashed)
    assert session_header("ü") != session_header("u") and session_header("x" * 200) != "x" * 200
    assert stable_hash("a") == stable_hash("a") != stable_hash("b")


@pytest.mark.parametrize("bad", [0.5, float("nan"), float("inf")])
def test_a_load_factor_below_one_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="load_factor"):
        Affinity("session", bad)
