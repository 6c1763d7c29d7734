"""ResponseCache: answered chat requests kept in SQLite, so the same request is never paid twice.

Key: sha256 of the request body as it is sent (served model name, messages, tools and every
sampling parameter, the target's request defaults included), serialised as sorted JSON. Value: the
server's chat-completion body. A request is cacheable when its temperature is 0 (greedy, the
reproducible setting); a sampled one (temperature > 0, or none given: the server's default samples)
only with `sampled=True` (`--cache-sampled`): a sampled answer replayed is one draw, not a new one.

Durability: WAL journal, `synchronous=NORMAL`: a committed answer survives the process being killed
(kill -9) at any point, and a torn write never shows (SQLite's transactions). Many writers: every
process opens its own connection; writes take SQLite's lock with a busy timeout, readers never block
writers (WAL). Each answer is committed when it arrives, so a crash loses nothing already answered.

The file defaults to `$OPS_HOME/cache/responses.sqlite` (`default_cache_path`).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestra_ops.core.paths import ops_home
from orchestra_ops.errors import ConfigError

BUSY_TIMEOUT_S = 30.0
SCHEMA = """CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    body BLOB NOT NULL,
    created REAL NOT NULL
)"""


def default_cache_path() -> Path:
    return ops_home() / "cache" / "responses.sqlite"


def request_key(body: Mapping[str, Any]) -> str:
    """The cache key of one request body (model, messages, tools, sampling parameters)."""
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
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

    def to_json(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "stored": self.stored,
                "skipped_sampled": self.skipped_sampled}


class ResponseCache:
    """One SQLite file of answered requests (see the module doc). Safe to share across threads."""

    def __init__(self, path: str | Path, *, sampled: bool = False) -> None:
        self.path = Path(path)
        self.sampled = sampled
        self.stats = CacheStats()
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                       check_same_thread=False)
            self._prepare(time.monotonic() + BUSY_TIMEOUT_S)
        except (OSError, sqlite3.Error) as exc:
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

    def cacheable(self, body: Mapping[str, Any]) -> bool:
        if self.sampled or not is_sampled(body):
            return True
        self.stats.skipped_sampled += 1
        return False

    def get(self, key: str) -> bytes | None:
        with self._lock:
            row = self._db.execute("SELECT body FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            self.stats.misses += 1
            return None
        self.stats.hits += 1
        return bytes(row[0])

    def put(self, key: str, model: str, body: bytes) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO responses (key, model, body, created) VALUES (?, ?, ?, ?)",
                             (key, model, body, time.time()))
        self.stats.stored += 1

    def count(self) -> int:
        with self._lock:
            row = self._db.execute("SELECT COUNT(*) FROM responses").fetchone()
        return int(row[0])

    def describe(self) -> dict[str, Any]:
        """What run.json records of the cache."""
        return {"path": str(self.path.resolve()), "sampled": self.sampled}

    def close(self) -> None:
        with self._lock:
            self._db.close()


def cache_entry(cache: ResponseCache | None, previous: Mapping[str, Any] | None) -> dict[str, Any]:
    """run.json's record of the cache: this invocation's (`cache`) and whether any invocation used one."""
    used_before = bool((previous or {}).get("cache_used"))
    return {"cache": cache.describe() if cache is not None else None, "cache_used": used_before or cache is not None}


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
