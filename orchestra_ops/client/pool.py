"""ReplicaPool: spread one model's requests over its replicas and keep failing ones out.

- A request goes to the healthy replica with the fewest outstanding requests that is below its
  cap; when every healthy replica is at its cap, it waits for a slot.
- A request that names a session (`acquire(session=KEY)`) goes to its session's replica instead,
  chosen by consistent hashing with bounded loads (affinity.py) while the pool's affinity is
  "session" (the default); `end_session(KEY)` forgets it when its unit of work is done. A session
  that moves (its replica ejected, over the load bound or at its cap) is reported to `on_move`.
- A replica that refuses connections is ejected at once; one that times out or answers 5xx
  `eject_after` times in a row is ejected too. An ejected replica is probed (`GET /health`) in
  the background with growing intervals and comes back on the first 200.
- In a `lockstep` pool (the ranks of vLLM's hybrid or external data parallelism, which step together)
  one ejected replica takes every other out with it, and they come back together once each has
  answered a probe: a rank whose partner died would only hold requests until they time out.
- When no replica is healthy, a request waits at most `unavailable_wait_s`, then fails with a
  CallError of kind `no_replica` that lists every replica and why it is out.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections import deque
from collections.abc import Callable, Sequence
from typing import Literal

from orchestra_ops.client.affinity import Affinity, Move, SessionAffinity
from orchestra_ops.client.call_errors import CallError, TransportError
from orchestra_ops.client.replica import Replica
from orchestra_ops.client.transport import Transport

log = logging.getLogger(__name__)

Outcome = Literal["ok", "busy", "fail", "down"]


class ReplicaPool:
    def __init__(self, name: str, replicas: Sequence[Replica], transport: Transport, *,
                 unavailable_wait_s: float = 60.0, eject_after: int = 3,
                 probe_interval_s: float = 0.25, probe_max_interval_s: float = 5.0,
                 affinity: Affinity | None = None, lockstep: bool = False) -> None:
        if not replicas:
            raise ValueError(f"{name}: a pool needs at least one replica")
        self.name = name
        self.replicas = list(replicas)
        self.transport = transport
        self.unavailable_wait_s = unavailable_wait_s
        self.eject_after = eject_after
        self.probe_interval_s = probe_interval_s
        self.probe_max_interval_s = probe_max_interval_s
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._probes: dict[int, asyncio.Task[None]] = {}
        self._turn = itertools.count()
        self._last_pick: dict[int, int] = {}
        self.on_eject: Callable[[str, str, str], None] | None = None  # (pool, replica address, reason)
        self.affinity = affinity or Affinity()
        self.sessions: SessionAffinity | None = (SessionAffinity(self.replicas, self.affinity.load_factor)
                                                 if self.affinity.mode == "session" else None)
        self.on_move: Callable[[str, Move], None] | None = None  # (pool, the move)
        self.lockstep = lockstep
        self._answered: set[int] = set()  # lockstep: the members whose probe answered since the group went out

    @property
    def healthy(self) -> list[Replica]:
        return [r for r in self.replicas if r.healthy]

    def _pick(self, avoid: Replica | None, session: str | None) -> Replica | None:
        if session is not None and self.sessions is not None:
            placed = self.sessions.pick(session, avoid)
            if placed is not None:
                replica, move = placed
                if move is not None and self.on_move is not None:
                    self.on_move(self.name, move)
                return replica
        free = [r for r in self.replicas if r.healthy and r.outstanding < r.cap]
        if avoid is not None and len(free) > 1:
            free = [r for r in free if r is not avoid] or free
        if not free:
            return None
        # fewest outstanding; on a tie, the one picked longest ago (round robin when idle)
        return min(free, key=lambda r: (r.outstanding, self._last_pick.get(id(r), -1)))

    async def acquire(self, avoid: Replica | None = None, session: str | None = None) -> Replica:
        """A replica with a free slot (its outstanding count already taken); see the module doc.

        `avoid`: the replica the previous attempt of this call failed on (a retry goes elsewhere when
        it can); `session`: the call's session key (None: least loaded, as with affinity "none").
        """
        loop = asyncio.get_running_loop()
        down_since: float | None = None
        while True:
            replica = self._pick(avoid, session)
            if replica is not None:
                replica.outstanding += 1
                replica.requests += 1
                self._last_pick[id(replica)] = next(self._turn)
                return replica
            timeout: float | None = None
            if not self.healthy:
                now = loop.time()
                down_since = now if down_since is None else down_since
                timeout = self.unavailable_wait_s - (now - down_since)
                if timeout <= 0:
                    raise CallError("no_replica", self._down_message())
            else:
                down_since = None
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                await asyncio.wait({waiter}, timeout=timeout)
            finally:
                if not waiter.done():
                    waiter.cancel()
                    with contextlib.suppress(ValueError):
                        self._waiters.remove(waiter)

    def release(self, replica: Replica, outcome: Outcome, error: str = "") -> None:
        """Give the slot back. `busy` (a 429) says nothing about health; `down` ejects at once."""
        replica.outstanding -= 1
        if outcome == "ok":
            replica.consecutive_failures = 0
        elif outcome in ("fail", "down"):
            replica.consecutive_failures += 1
            replica.last_error = error
            if replica.healthy and (outcome == "down" or replica.consecutive_failures >= self.eject_after):
                self._eject(replica, error)
        self._wake(1)

    def end_session(self, session: str) -> None:
        """The session's unit of work is done: its placement is forgotten (a later call is placed anew)."""
        if self.sessions is not None:
            self.sessions.end(session)

    def _wake(self, count: int | None) -> None:
        woken = 0
        while self._waiters and (count is None or woken < count):
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                woken += 1

    def _eject(self, replica: Replica, reason: str) -> None:
        if replica.health_url is None:
            return  # nothing to probe: a provider endpoint stays in, its calls retry
        self._take_out(replica, reason)
        if self.lockstep:
            self._answered.clear()
            group = f"{replica.address} of its group is out ({reason}): the group serves only whole"
            for other in self.replicas:
                if other is not replica and other.healthy and other.health_url is not None:
                    other.last_error = group
                    self._take_out(other, group)
        if not self.healthy:
            self._wake(None)  # waiters switch to the bounded wait

    def _take_out(self, replica: Replica, reason: str) -> None:
        replica.healthy = False
        log.warning("%s: replica %s ejected (%s); probing it in the background", self.name, replica.address,
                    reason)
        if self.on_eject is not None:
            self.on_eject(self.name, replica.address, reason)
        if id(replica) not in self._probes:
            self._probes[id(replica)] = asyncio.get_running_loop().create_task(self._probe(replica))

    def _back(self, replica: Replica) -> bool:
        """A probe of `replica` answered 200: bring it back (in a lockstep pool, the whole group once every
        member has answered). Whether it is back."""
        if self.lockstep:
            self._answered.add(id(replica))
            if not all(r.healthy or id(r) in self._answered for r in self.replicas):
                return False
            back = [r for r in self.replicas if not r.healthy]
            self._answered.clear()
        else:
            back = [replica]
        for member in back:
            member.healthy = True
            member.consecutive_failures = 0
            log.warning("%s: replica %s is back", self.name, member.address)
        self._wake(None)
        return True

    async def _probe(self, replica: Replica) -> None:
        assert replica.health_url is not None
        interval = self.probe_interval_s
        try:
            while not replica.healthy:
                await asyncio.sleep(interval)
                try:
                    resp = await self.transport.get(replica, replica.health_url, timeout=5.0)
                except TransportError as exc:
                    replica.last_error = exc.message
                    self._answered.discard(id(replica))
                else:
                    if resp.status == 200:
                        if self._back(replica):
                            return
                        interval = self.probe_interval_s  # answered: wait for the rest of its group
                        continue
                    replica.last_error = f"/health answered {resp.status}"
                    self._answered.discard(id(replica))
                interval = min(self.probe_max_interval_s, interval * 2)
        finally:
            self._probes.pop(id(replica), None)

    def _down_message(self) -> str:
        states = "; ".join(f"{r.address}: {r.last_error or 'down'}" for r in self.replicas)
        return (f"all {len(self.replicas)} replica(s) of '{self.name}' are down after waiting "
                f"{self.unavailable_wait_s:g} s ({states})")

    async def close(self) -> None:
        probes = list(self._probes.values())
        for task in probes:
            task.cancel()
        for task in probes:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._wake(None)
