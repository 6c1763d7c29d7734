"""One adapter into several replicas, all or none, within a time limit and through a signal.

    survey            what each replica serves under the name now (/v1/models: the card's `root`)
    load_or_roll_back POST /v1/load_lora_adapter to each replica at once, all within `timeout_s`; when one
                      refuses, does not answer in time, or SIGINT/SIGTERM/SIGHUP arrives, unload it again
                      from every replica that took it or may have (no answer: a frozen replica may load
                      it when it wakes), then ask every replica what it serves, so the message says what
                      is true (`where_served`), never "served nowhere" while one serves it
    same_dir          whether a replica's root is the directory asked for

Signals: while the load runs, the first SIGINT, SIGTERM or SIGHUP cancels it and starts the rollback;
more signals are noted and ignored until the rollback (itself bounded) is done. Outside the main
thread (no signal handlers there) a signal does what it always does.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx

from orchestra_ops.core.procs import loop_signal_handlers
from orchestra_ops.fleet.lora.calls import ReplicaOutcome, load_one, model_cards, unload_one
from orchestra_ops.fleet.state import ProcessRecord

T = TypeVar("T")

SURVEY_TIMEOUT_S = 10.0
ROLLBACK_MIN_S = 10.0  # a rollback gets at least this long, even when the load used up the limit
ROLLBACK_MAX_S = 60.0
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass(frozen=True)
class Served:
    """One replica's view of an adapter name: the directory it serves it from, or why it could not say."""

    replica: ProcessRecord
    root: str | None = None  # None: not served there (or unknown, with `error`)
    error: str | None = None  # /v1/models did not answer


@dataclass
class LoadAttempt:
    outcomes: list[ReplicaOutcome]  # one per replica asked, in order (empty when a signal cut it short)
    signal: str | None = None  # the signal that interrupted the load (then it was rolled back)
    undo: list[tuple[ProcessRecord, ReplicaOutcome]] = field(default_factory=list)  # the rollback's unloads
    served: list[Served] = field(default_factory=list)  # after a rollback: each replica's view of the name

    @property
    def ok(self) -> bool:
        return self.signal is None and all(o.ok for o in self.outcomes)

    def stuck(self) -> list[ProcessRecord]:
        """Replicas that may still serve the adapter after the rollback (their unload did not succeed)."""
        return [record for record, outcome in self.undo if not outcome.ok]


def same_dir(root: str, path: str) -> bool:
    """A replica's root and a directory: the same path, or (both here) the same directory."""
    if os.path.normpath(root) == os.path.normpath(path):
        return True
    try:
        return Path(root).resolve(strict=True) == Path(path).resolve(strict=True)
    except OSError:
        return False


def survey(replicas: list[ProcessRecord], name: str, timeout_s: float = SURVEY_TIMEOUT_S) -> list[Served]:
    return asyncio.run(_survey(replicas, name, timeout_s)) if replicas else []


async def _survey(replicas: list[ProcessRecord], name: str, timeout_s: float) -> list[Served]:
    async with httpx.AsyncClient(timeout=timeout_s, trust_env=False) as client:
        cards = await _bounded(replicas, lambda r: model_cards(client, r), timeout_s)
    out = []
    for record, listed in zip(replicas, cards, strict=True):
        if listed is None or isinstance(listed, str):
            out.append(Served(record, error=listed or f"/v1/models did not answer within {timeout_s:.1f} s"))
        else:
            card = listed.get(name)
            out.append(Served(record, root=None if card is None else str(card.get("root") or "")))
    return out


def where_served(name: str, served: list[Served], also: Sequence[str] = ()) -> str:
    """What is true of the name after a rollback, in one sentence (`also`: replicas known to serve it)."""
    serving = [*also, *(s.replica.name for s in served if s.root is not None)]
    unknown = [f"{s.replica.name} ({s.error})" for s in served if s.error]
    if not serving and not unknown:
        return f"'{name}' is served nowhere"
    parts = []
    if serving:
        parts.append(f"'{name}' is still served by {', '.join(serving)}")
    if unknown:
        parts.append(f"could not ask {', '.join(unknown)} whether it serves '{name}'")
    return "; ".join(parts)


def load_or_roll_back(replicas: list[ProcessRecord], name: str, path: str, timeout_s: float) -> LoadAttempt:
    """Load into every replica within `timeout_s`; on any failure or a signal, roll back (see the module doc)."""
    if not replicas:
        return LoadAttempt([])
    return asyncio.run(_attempt(replicas, name, path, timeout_s))


async def _attempt(replicas: list[ProcessRecord], name: str, path: str, timeout_s: float) -> LoadAttempt:
    received: list[str] = []
    async with httpx.AsyncClient(timeout=timeout_s, trust_env=False) as client:
        task = asyncio.ensure_future(_bounded(replicas, lambda r: load_one(client, r, name, path), timeout_s))
        with _signals_cancel(task, received):
            try:
                answers = await task
            except asyncio.CancelledError:
                if not received:
                    raise
                answers = []
            outcomes = [a if isinstance(a, ReplicaOutcome) else _no_answer(r, timeout_s)
                        for r, a in zip(replicas, answers, strict=False)]
            attempt = LoadAttempt(outcomes, received[0] if received else None)
            if attempt.ok:
                return attempt
            # refused outright (an HTTP error status): it did not take the adapter; anything else may have
            undo = replicas if attempt.signal else [r for r, o in zip(replicas, outcomes, strict=True)
                                                    if o.status is None or o.status == 200]
            limit = ROLLBACK_MIN_S if attempt.signal else min(max(timeout_s, ROLLBACK_MIN_S), ROLLBACK_MAX_S)
            attempt.undo = await _roll_back(undo, name, limit)
            stuck = {record.name: outcome.message for record, outcome in attempt.undo if outcome.status is None}
            asked = await _survey([r for r in replicas if r.name not in stuck], name, ROLLBACK_MIN_S)
            views = {s.replica.name: s for s in asked}
            attempt.served = [views.get(r.name) or Served(r, error=f"the unload got {stuck[r.name]}")
                              for r in replicas]
            return attempt


async def _roll_back(replicas: list[ProcessRecord], name: str,
                     timeout_s: float) -> list[tuple[ProcessRecord, ReplicaOutcome]]:
    async with httpx.AsyncClient(timeout=timeout_s, trust_env=False) as client:
        answers = await _bounded(replicas, lambda r: unload_one(client, r, name), timeout_s)
    return [(r, a if isinstance(a, ReplicaOutcome) else _no_answer(r, timeout_s))
            for r, a in zip(replicas, answers, strict=True)]


async def _bounded(replicas: list[ProcessRecord], call: Callable[[ProcessRecord], Awaitable[T]],
                      timeout_s: float) -> list[T | None]:
    """`call` on every replica at once, all within `timeout_s` in total; None for one that did not finish."""
    if not replicas:
        return []
    tasks = [asyncio.ensure_future(call(r)) for r in replicas]
    try:
        await asyncio.wait(tasks, timeout=timeout_s)
    finally:
        for task in tasks:
            task.cancel()
    return [t.result() if t.done() and not t.cancelled() and t.exception() is None else None for t in tasks]


def _no_answer(record: ProcessRecord, timeout_s: float) -> ReplicaOutcome:
    return ReplicaOutcome(record.name, f"{record.host}:{record.port}", False, None,
                          f"no answer within {timeout_s:.1f} s (frozen or overloaded?)")


@contextlib.contextmanager
def _signals_cancel(task: asyncio.Future[Any], received: list[str]) -> Iterator[None]:
    """SIGINT/SIGTERM/SIGHUP: the first cancels `task`; every one is noted in `received` (and nothing else)."""
    loop = asyncio.get_running_loop()

    def on_signal(sig: signal.Signals) -> None:
        received.append(sig.name)
        task.cancel()  # a no-op once it is done: the rollback that follows is not cut short

    with loop_signal_handlers(loop, {sig: functools.partial(on_signal, sig) for sig in SIGNALS}):
        yield


def refusal(name: str, key: str, attempt: LoadAttempt, adopted: list[str]) -> str:
    """Why a load did not happen, and what each replica serves now (after the rollback)."""
    if attempt.signal:
        lines = [f"interrupted ({attempt.signal}) while loading '{name}' into {key}"]
    else:
        refused = [o for o in attempt.outcomes if not o.ok]
        lines = [f"cannot load adapter '{name}' into {key}: {len(refused)} of {len(attempt.outcomes)} replica(s) "
                 "refused or did not answer"]
        lines += [f"  {o.replica} ({o.address}): {o.message}" for o in refused]
    undone = [record.name for record, outcome in attempt.undo if outcome.ok and outcome.status == 200]
    if undone:
        lines.append(f"  rolled back: unloaded again from {', '.join(undone)}")
    lines += [f"  could not unload it again from {outcome.replica}: {outcome.message}"
              for _, outcome in attempt.undo if not outcome.ok]
    if adopted:
        lines.append(f"  {', '.join(adopted)} served it from the same directory before this load, and still do")
    lines.append(f"  {where_served(name, attempt.served, adopted)}")
    if attempt.stuck() or adopted:
        lines.append(f"  `ops lora unload {name}` removes it (once those replicas answer)")
    return "\n".join(lines)
