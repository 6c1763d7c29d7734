"""Encode a batch of queries once, search the index once, cut each query's own hits out.

A query restricted to a set of documents (an eid of the examples file) is searched deeper until
it has its `topk` allowed hits or the whole index was ranked.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from orchestra_ops.core.fsutil import read_json
from orchestra_ops.errors import ConfigError

from .encoder import TextEncoder
from .index import Document, LoadedIndex

log = logging.getLogger(__name__)

DEEPEN_FACTOR = 4  # a restricted query first ranks topk * this, then multiplies the depth by it


@dataclass(frozen=True)
class Query:
    text: str
    topk: int
    allowed: frozenset[int] | None = None  # rows this query may return; None: any


@dataclass(frozen=True)
class Hit:
    document: Document
    score: float


class Retriever:
    """The encoder and the index together. Not thread-safe: one owner calls it (or one lock guards it)."""

    def __init__(self, encoder: TextEncoder, loaded: LoadedIndex, encode_batch_size: int = 64) -> None:
        self.encoder = encoder
        self.loaded = loaded
        self.encode_batch_size = encode_batch_size

    def retrieve(self, queries: Sequence[Query]) -> list[list[Hit]]:
        """Hits per query, best first, in the order of `queries`."""
        if not queries:
            return []
        vectors = self.encoder.encode([q.text for q in queries], self.encode_batch_size)
        return self.search(vectors, queries)

    def search(self, vectors: np.ndarray, queries: Sequence[Query]) -> list[list[Hit]]:
        ntotal = self.loaded.count
        results: list[list[Hit]] = [[] for _ in queries]
        pending = list(range(len(queries)))
        depth = {i: self._first_depth(queries[i], ntotal) for i in pending}
        while pending:
            k = max(depth[i] for i in pending)
            scores, rows = self.loaded.index.search(vectors[pending], k)
            still: list[int] = []
            for pos, i in enumerate(pending):
                query = queries[i]
                hits = self._hits(query, scores[pos], rows[pos])
                wanted = query.topk if query.allowed is None else min(query.topk, len(query.allowed))
                if len(hits) >= wanted or k >= ntotal:
                    results[i] = hits[: query.topk]
                else:
                    depth[i] = min(ntotal, k * DEEPEN_FACTOR)
                    still.append(i)
            pending = still
        return results

    @staticmethod
    def _first_depth(query: Query, ntotal: int) -> int:
        depth = query.topk if query.allowed is None else query.topk * DEEPEN_FACTOR
        return max(1, min(ntotal, depth))

    def _hits(self, query: Query, scores: np.ndarray, rows: np.ndarray) -> list[Hit]:
        docs = self.loaded.docs
        hits: list[Hit] = []
        for score, row in zip(scores.tolist(), rows.tolist(), strict=True):
            if row < 0 or (query.allowed is not None and row not in query.allowed):
                continue
            hits.append(Hit(docs[row], float(score)))
            if len(hits) == query.topk:
                break
        return hits


class UnknownEid(KeyError):
    """A request's eid is not in the examples file."""


class ExampleFilter:
    """`--examples FILE`: eid -> the rows its queries may return."""

    def __init__(self, allowed: dict[str, frozenset[int]]) -> None:
        self._allowed = allowed

    def __len__(self) -> int:
        return len(self._allowed)

    def rows_for(self, eid: str | int | None) -> frozenset[int] | None:
        """The allowed rows of `eid`; None (no restriction) for a request without eid."""
        if eid is None:
            return None
        try:
            return self._allowed[str(eid)]
        except KeyError:
            raise UnknownEid(str(eid)) from None

    @classmethod
    def load(cls, path: Path, row_of_id: dict[str, int]) -> ExampleFilter:
        """Read a JSON object eid -> [document id, …]; ids not in the index are logged and dropped."""
        raw = read_json(path, error=ConfigError, missing="no such examples file")
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: expected a JSON object mapping eid -> list of document ids")
        allowed: dict[str, frozenset[int]] = {}
        unknown = 0
        for eid, ids in raw.items():
            if not isinstance(ids, list):
                raise ConfigError(f"{path}: eid {eid!r}: expected a list of document ids")
            rows = [row_of_id.get(str(doc_id)) for doc_id in ids]
            unknown += sum(row is None for row in rows)
            allowed[str(eid)] = frozenset(row for row in rows if row is not None)
        if unknown:
            log.warning("%s: %d document id(s) are not in the index and are ignored", path, unknown)
        return cls(allowed)
