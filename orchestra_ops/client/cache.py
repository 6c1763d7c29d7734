"""ResponseCache: answered chat requests kept in SQLite, so the same request is never paid twice.

Key: sha256 of the request body as it is sent (served model name, messages, tools and every
sampling parameter, the target's request defaults included) and of the identity of what the served
name stands for (identity.py: an adapter's directory and a fingerprint of its files, a model's path or
revision, a provider's URL), serialised as sorted JSON: a new checkpoint under an old name never gets
the old answers. Value: the server's chat-completion body. A request is cacheable when its temperature is 0 (greedy, the
reproducible setting); a sampled one (temperature > 0, or none given: the server's default samples)
only with `sampled=True` (`--cache-sampled`): a sampled answer replayed is one draw, not a new one.

Durability: WAL journal, `synchronous=NORMAL`: a committed answer survives the process being killed
(kill -9) at any point, and a torn write never shows (SQLite's transactions). Many writers: every
process opens its own connection; writes take SQLite's lock with a busy timeout, readers never block
writers (WAL). Each answer is committed when it arrives, so a crash loses nothing already answered.

Damage: a file whose pages are damaged is refused at open (`PRAGMA quick_check`, a ConfigError naming
the file: exit 2). Damage found later, by a read or a write during the run, turns the cache off for
the rest of the run with one warning: every request from then on is asked of its model (a miss), and
nothing more is written to the file.

The file defaults to `$OPS_HOME/cache/responses.sqlite` (`default_cache_path`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestra_ops.core.paths import ops_home
from orchestra_ops.errors import ConfigError

log = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 30.0
SCHEMA = """CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    body BLOB NOT NULL,
    created REAL NOT NULL
)"""


def default_cache_path() -> Path:
    return ops_home() / "cache" / "responses.sqlite"


def request_key(body: Mapping[str, Any], identity: str | None = None) -> str:
    """The cache key of one request body (model, messages, tools, sampling parameters) sent to the target
    whose identity digest is `identity` (identity.py; None: the body alone)."""
    keyed: Mapping[str, Any] = body if identity is None else {"body": body, "identity": identity}
    text = json.dumps(keyed, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def is_sampled(body: Mapping[str, Any]) -> bool:
    """True unless the request asks for greedy decoding (temperature 0)."""
    temperature = body.get("temperature")
    return not (isinstance(temperature, (int, float)) and temperature == 0)


def is_lock_contention(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    stored: int = 0
    skipped_sampled: int = 0
    errors: int = 0  # reads and writes that failed (the first turns the cache off)

    def to_json(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "stored": self.stored,
                "skipped_sampled": self.skipped_sampled, "errors": self.errors}


class ResponseCache:
    """One SQLite file of answered requests (see the module doc). Safe to share across threads."""

    def __init__(self, path: str | Path, *, sampled: bool = False) -> None:
        self.path = Path(path)
        self.sampled = sampled
        self.stats = CacheStats()
        self.broken: str | None = None  # why the cache was turned off mid-run (None: it works)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                       check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"--cache {self.path}: cannot open it as a SQLite response cache: {exc}") from None
        try:
            self._prepare(time.monotonic() + BUSY_TIMEOUT_S)
            self._check()
        except (OSError, sqlite3.Error, ConfigError) as exc:
            self._db.close()
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(f"--cache {self.path}: cannot open it as a SQLite response cache: {exc}") from None

    def _prepare(self, deadline: float) -> None:
        """WAL mode and the table, retried while another process holds the file's lock.

        SQLite answers "database is locked" at once, without waiting out the busy timeout, when
        several processes switch a new file to WAL together or one opens it while another recovers
        or checkpoints it; every step here is idempotent, so a retry is always safe."""
        delay = 0.01
        while True:
            try:
                mode = self._db.execute("PRAGMA journal_mode").fetchone()
                if str(mode[0]).lower() != "wal":
                    self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.execute(SCHEMA)
                return
            except sqlite3.OperationalError as exc:
                if not is_lock_contention(exc) or time.monotonic() + delay > deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 0.5)

    def _check(self) -> None:
        """`PRAGMA quick_check`: a file with damaged pages is refused before the run asks it anything.

        It runs on a connection of its own, closed after: the run's connection starts with none of
        the file's pages in memory, so damage done to the file after this check shows at the first read."""
        checker = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            rows = checker.execute("PRAGMA quick_check(5)").fetchall()
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and is_lock_contention(exc):
                raise
            rows = [(str(exc),)]
        finally:
            checker.close()
        problems = [line.strip() for row in rows for line in str(row[0]).splitlines()
                    if line.strip() and not line.startswith("***")]  # "*** in database main ***" heads a list
        if problems != ["ok"]:
            raise ConfigError(f"--cache {self.path}: the file is damaged (PRAGMA quick_check: {problems[0]}"
                              f"{f'; and {len(problems) - 1} more' if len(problems) > 1 else ''}); move it away "
                              "(a new cache starts empty) or give --cache-file another path")

    def cacheable(self, body: Mapping[str, Any]) -> bool:
        if self.sampled or not is_sampled(body):
            return True
        self.stats.skipped_sampled += 1
        return False

    def get(self, key: str) -> bytes | None:
        """The stored answer, or None (not stored, or the cache is off: the caller asks the model)."""
        with self._lock:
            if self.broken is not None:
                self.stats.misses += 1
                return None
            try:
                row = self._db.execute("SELECT body FROM responses WHERE key = ?", (key,)).fetchone()
            except sqlite3.Error as exc:
                self._turn_off("a read", str(exc))
                row = None
        if row is None:
            self.stats.misses += 1
            return None
        self.stats.hits += 1
        return bytes(row[0])

    def put(self, key: str, model: str, body: bytes) -> None:
        """Store an answer; a failure turns the cache off (one warning), never the call that got the answer."""
        with self._lock:
            if self.broken is not None:
                return
            try:
                self._db.execute("INSERT OR REPLACE INTO responses (key, model, body, created) VALUES (?, ?, ?, ?)",
                                 (key, model, body, time.time()))
            except sqlite3.Error as exc:
                self._turn_off("a write", str(exc))
                return
        self.stats.stored += 1

    def turn_off(self, what: str, why: str) -> None:
        """The cache is damaged (`what` failed, `why`): off for the rest of the run, with one warning."""
        with self._lock:
            self._turn_off(what, why)

    def _turn_off(self, what: str, why: str) -> None:
        self.stats.errors += 1
        if self.broken is not None:
            return
        self.broken = f"{what} failed: {why}"
        log.warning("response cache %s: %s; the rest of this run asks the models and stores nothing in it "
                    "(`sqlite3 %s 'PRAGMA quick_check'` says what is damaged)", self.path, self.broken, self.path)

    def count(self) -> int:
        with self._lock:
            row = self._db.execute("SELECT COUNT(*) FROM responses").fetchone()
        return int(row[0])

    def describe(self) -> dict[str, Any]:
        """What run.json records of the cache."""
        return {"path": str(self.path.resolve()), "sampled": self.sampled}

    def close(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):  # a damaged file must not fail the end of a run
            self._db.close()


def cache_entry(cache: ResponseCache | None, previous: Mapping[str, Any] | None,
                identities: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """run.json's record of the cache: this invocation's (`cache`, with what each name it keyed on stood
    for: `identities`) and whether any invocation used one."""
    used_before = bool((previous or {}).get("cache_used"))
    described = None if cache is None else {**cache.describe(), "identities": dict(identities or {})}
    return {"cache": described, "cache_used": used_before or cache is not None}


def cache_counts(run_dir: str | Path) -> dict[str, Any] | None:
    """Model calls in profile.jsonl answered from the cache, of all of them (None: no profile.jsonl)."""
    path = Path(run_dir) / "profile.jsonl"
    calls = hits = 0
    try:
        handle = open(path, "rb")  # noqa: SIM115
    except FileNotFoundError:
        return None
    with handle:
        for raw in handle:
            if b'"model_call"' not in raw:
                continue
            calls += 1
            hits += b'"cache": "hit"' in raw
    return {"hits": hits, "calls": calls, "model_calls": calls - hits}
