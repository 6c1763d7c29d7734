"""Session affinity with bounded loads: which replica a call of a multi-round session goes to.

vLLM reuses the KV of a prompt's prefix only on the replica that computed it, so every call of one
session (an agent task, a tau2 simulation side, a HealthBench example's rubric items) should go to
the same replica. `SessionAffinity` does that with consistent hashing with bounded loads (Mirrokni,
Thorup, Zadimoghaddam, "Consistent Hashing with Bounded Loads", SODA 2018):

- The replicas sit on a ring (`HashRing`, VNODES virtual nodes each, placed by a stable hash of
  the replica's address: the same fleet gives the same ring in every process, so a resumed run
  maps its sessions where the first run did).
- A session's first call goes to the first replica clockwise of the key's hash that is eligible:
  healthy, below its connection cap, and holding no more than ceil(c * mean) calls in flight with
  this call placed, where mean = (calls in flight on the healthy replicas + 1) / healthy replicas
  and c is the load factor (1.25 by default). Some healthy replica always meets the bound (c >= 1).
- The session is sticky: the table remembers its replica, and its later calls go there while it
  is eligible. When it is not (ejected, over the bound, at its cap) the call goes to the next
  eligible replica on the ring and the session moves there (a `Move`, reported to the caller).
  A replica that comes back takes new sessions by hash; sessions that moved stay where they went.
- A retry that must avoid the replica that just failed (not ejected) goes to the next eligible one
  on the ring for that call only: the session does not move.
- `end(key)` drops a session when its unit of work is done; the table also keeps at most
  `max_sessions` entries (least recently used out), so it never grows without bound. A dropped
  session that comes back is placed by hash again.

When no replica is eligible under the bound (only possible with unequal caps or `avoid`), `pick`
returns None and the pool falls back to its least-loaded choice.
"""

from __future__ import annotations

import bisect
import hashlib
import math
import re
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from orchestra_ops.client.replica import Replica

AffinityMode = Literal["session", "none"]
MoveReason = Literal["ejected", "over_bound", "at_cap"]
DEFAULT_LOAD_FACTOR = 1.25
VNODES = 160  # virtual nodes per replica: each replica's share of the ring within a few % of 1/n
MAX_SESSIONS = 100_000
_HEADER_TOKEN = re.compile(r"^[A-Za-z0-9._:/@+=-]{1,128}$")


def stable_hash(text: str) -> int:
    """A 64-bit hash that is the same in every process (Python's hash() is salted per process)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def session_header(key: str) -> str:
    """The `x-session-id` value for a session key: the key itself when it is a plain header token,
    else a stable 32-hex digest of it (a key with spaces, quotes or non-ASCII never reaches a header)."""
    if _HEADER_TOKEN.match(key):
        return key
    return hashlib.blake2b(key.encode(), digest_size=16).hexdigest()


@dataclass(frozen=True)
class Affinity:
    """How a model's pool places calls that carry a session key (the topology's `routing:`)."""

    mode: AffinityMode = "session"
    load_factor: float = DEFAULT_LOAD_FACTOR

    def __post_init__(self) -> None:
        if not math.isfinite(self.load_factor) or self.load_factor < 1.0:
            raise ValueError(f"load_factor {self.load_factor} must be a number >= 1")


@dataclass(frozen=True)
class Move:
    """A session placed on another replica than the one it was on."""

    session: str
    source: str  # the address it was on
    dest: str  # the address it goes to
    reason: MoveReason


class HashRing:
    """Replica indices on a ring of VNODES points each; `order(key)` walks it from the key's hash."""

    def __init__(self, names: Sequence[str], vnodes: int = VNODES) -> None:
        points = sorted((stable_hash(f"{name}#{i}"), index) for index, name in enumerate(names)
                        for i in range(vnodes))
        self._hashes = [h for h, _ in points]
        self._owners = [index for _, index in points]
        self.size = len(names)

    def order(self, key: str) -> Iterator[int]:
        """Every replica index once, in ring order clockwise of the key's hash."""
        start = bisect.bisect(self._hashes, stable_hash(key))
        seen: set[int] = set()
        total = len(self._owners)
        for step in range(total):
            owner = self._owners[(start + step) % total]
            if owner not in seen:
                seen.add(owner)
                yield owner
                if len(seen) == self.size:
                    return


class SessionAffinity:
    """The sticky session table of one pool and the bounded-load choice (see the module doc)."""

    def __init__(self, replicas: Sequence[Replica], load_factor: float = DEFAULT_LOAD_FACTOR, *,
                 max_sessions: int = MAX_SESSIONS) -> None:
        self.replicas = list(replicas)
        self.load_factor = load_factor
        self.max_sessions = max_sessions
        self.ring = HashRing([r.address for r in self.replicas])
        self._table: OrderedDict[str, Replica] = OrderedDict()
        self.moves = 0

    def __len__(self) -> int:
        return len(self._table)

    def where(self, key: str) -> Replica | None:
        """The replica the session is on (None: not placed, or dropped)."""
        return self._table.get(key)

    def bound(self) -> int:
        """The most calls a replica may hold with one more call placed: ceil(c * mean)."""
        healthy = [r for r in self.replicas if r.healthy]
        if not healthy:
            return 0
        in_flight = sum(r.outstanding for r in healthy) + 1
        return math.ceil(self.load_factor * in_flight / len(healthy) - 1e-9)

    def pick(self, key: str, avoid: Replica | None = None) -> tuple[Replica, Move | None] | None:
        """The replica for the session's next call and the move it makes (None: it stays or is new);
        None when no replica is eligible (the pool then falls back to least loaded)."""
        bound = self.bound()

        def eligible(replica: Replica) -> bool:
            return (replica.healthy and replica.outstanding < replica.cap and replica.outstanding + 1 <= bound
                    and replica is not avoid)

        current = self._table.get(key)
        if current is not None and eligible(current):
            self._table.move_to_end(key)
            return current, None
        for index in self.ring.order(key):
            replica = self.replicas[index]
            if not eligible(replica):
                continue
            if current is not None and current is avoid and current.healthy:
                return replica, None  # a retry elsewhere; the session stays where it is
            move = None
            if current is not None:
                move = Move(key, current.address, replica.address, _reason(current))
                self.moves += 1
            self._remember(key, replica)
            return replica, move
        return None

    def _remember(self, key: str, replica: Replica) -> None:
        self._table[key] = replica
        self._table.move_to_end(key)
        while len(self._table) > self.max_sessions:
            self._table.popitem(last=False)

    def end(self, key: str) -> None:
        """The session's unit of work is done: forget where it was."""
        self._table.pop(key, None)


def _reason(replica: Replica) -> MoveReason:
    if not replica.healthy:
        return "ejected"
    if replica.outstanding >= replica.cap:
        return "at_cap"
    return "over_bound"
