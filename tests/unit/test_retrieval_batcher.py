"""The batcher, the retriever and the index directory, with a fake encoder (no model, real FAISS)."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
faiss = pytest.importorskip("faiss")

from orchestra_ops.services.retrieval.batcher import (  # noqa: E402
    BatchingDispatcher,
    QueueFull,
    SerialDispatcher,
)
from orchestra_ops.services.retrieval.index import (  # noqa: E402
    CorpusError,
    IndexDirError,
    build_index,
    check_out_dir,
    load_index,
    read_corpus,
)
from orchestra_ops.services.retrieval.metrics import ServerMetrics  # noqa: E402
from orchestra_ops.services.retrieval.search import ExampleFilter, Query, Retriever, UnknownEid  # noqa: E402

from orchestra_ops.errors import ConfigError  # noqa: E402

pytestmark = pytest.mark.retrieval

WAIT = 30  # seconds: a hang guard, not a timing claim


class FakeEncoder:
    """A deterministic unit vector per text; records every batch; can hold the worker in encode()."""

    def __init__(self, dim: int = 32) -> None:
        self._dim = dim
        self.calls: list[int] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.release.set()
        self.fail_next = False

    @property
    def dim(self) -> int:
        return self._dim

    def encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        self.calls.append(len(texts))
        self.entered.set()
        assert self.release.wait(WAIT)
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("encoder exploded")
        rows = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")
            vec = np.random.default_rng(seed).standard_normal(self._dim).astype(np.float32)
            rows.append(vec / np.linalg.norm(vec))
        return np.stack(rows)


def corpus(n: int) -> list[dict]:
    return [{"id": f"d{i}", "content": f"document number {i}", "lang": "en"} for i in range(n)]


@pytest.fixture
def encoder() -> FakeEncoder:
    return FakeEncoder()


@pytest.fixture
def retriever(tmp_path: Path, encoder: FakeEncoder) -> Retriever:
    loaded = build_index(corpus(300), tmp_path / "idx", encoder, batch_size=100)
    encoder.calls.clear()
    encoder.entered.clear()
    return Retriever(encoder, loaded, encode_batch_size=64)


def q(i: int, topk: int = 3, allowed: frozenset[int] | None = None) -> Query:
    return Query(f"document number {i}", topk, allowed)


# ---------------------------------------------------------------- batching


def test_each_caller_gets_its_own_results_in_batches(retriever: Retriever, encoder: FakeEncoder) -> None:
    dispatcher = BatchingDispatcher(retriever.retrieve, max_batch_size=64, max_wait_s=0.005, max_queue=1000)
    dispatcher.start()
    try:
        encoder.release.clear()
        first = dispatcher.submit([q(0)])
        assert encoder.entered.wait(WAIT)  # the worker holds request 0 inside encode()
        futures = [dispatcher.submit([q(i)]) for i in range(1, 200)]
        assert dispatcher.queue_depth == 199
        encoder.release.set()
        results = [first.result(WAIT), *(f.result(WAIT) for f in futures)]
    finally:
        dispatcher.close()
    for i, per_query in enumerate(results):
        assert len(per_query) == 1
        assert per_query[0][0].document["id"] == f"d{i}"
        assert per_query[0][0].score == pytest.approx(1.0, abs=1e-5)
    assert encoder.calls == [1, 64, 64, 64, 7]


def test_full_batch_goes_without_waiting_for_max_wait(retriever: Retriever, encoder: FakeEncoder) -> None:
    dispatcher = BatchingDispatcher(retriever.retrieve, max_batch_size=8, max_wait_s=3600, max_queue=100)
    dispatcher.start()
    try:
        futures = [dispatcher.submit([q(i)]) for i in range(8)]
        assert [f.result(WAIT)[0][0].document["id"] for f in futures] == [f"d{i}" for i in range(8)]
    finally:
        dispatcher.close()
    assert encoder.calls == [8]


def test_multi_query_requests_are_packed_and_sliced_back_in_order(retriever: Retriever, encoder: FakeEncoder) -> None:
    dispatcher = BatchingDispatcher(retriever.retrieve, max_batch_size=64, max_wait_s=0, max_queue=100)
    dispatcher.start()
    try:
        encoder.release.clear()
        a = dispatcher.submit([q(1), q(2), q(3)])
        assert encoder.entered.wait(WAIT)
        b = dispatcher.submit([q(10), q(11)])
        c = dispatcher.submit([q(20)] * 62)  # b + c fill a batch of 64 exactly
        d = dispatcher.submit([q(30)] * 62)  # would overflow it: goes next
        encoder.release.set()
        ids = [[hits[0].document["id"] for hits in f.result(WAIT)] for f in (a, b, c, d)]
    finally:
        dispatcher.close()
    assert ids[:2] == [["d1", "d2", "d3"], ["d10", "d11"]]
    assert ids[2] == ["d20"] * 62 and ids[3] == ["d30"] * 62
    assert encoder.calls == [3, 64, 62]


def test_full_queue_raises_and_the_rest_complete(retriever: Retriever, encoder: FakeEncoder) -> None:
    dispatcher = BatchingDispatcher(retriever.retrieve, max_batch_size=64, max_wait_s=0, max_queue=2)
    dispatcher.start()
    try:
        encoder.release.clear()
        running = dispatcher.submit([q(0)])
        assert encoder.entered.wait(WAIT)
        queued = [dispatcher.submit([q(1)]), dispatcher.submit([q(2)])]
        with pytest.raises(QueueFull):
            dispatcher.submit([q(3)])
        encoder.release.set()
        assert [f.result(WAIT)[0][0].document["id"] for f in (running, *queued)] == ["d0", "d1", "d2"]
    finally:
        dispatcher.close()


def test_a_failing_batch_fails_its_callers_and_the_worker_survives(retriever: Retriever, encoder: FakeEncoder) -> None:
    dispatcher = BatchingDispatcher(retriever.retrieve, max_batch_size=4, max_wait_s=0, max_queue=10)
    dispatcher.start()
    try:
        encoder.fail_next = True
        with pytest.raises(RuntimeError, match="exploded"):
            dispatcher.submit([q(0)]).result(WAIT)
        assert dispatcher.submit([q(5)]).result(WAIT)[0][0].document["id"] == "d5"
        assert dispatcher.is_alive()
    finally:
        dispatcher.close()


def test_cancelled_requests_are_skipped(retriever: Retriever, encoder: FakeEncoder) -> None:
    dispatcher = BatchingDispatcher(retriever.retrieve, max_batch_size=64, max_wait_s=0, max_queue=10)
    dispatcher.start()
    try:
        encoder.release.clear()
        first = dispatcher.submit([q(0)])
        assert encoder.entered.wait(WAIT)
        gone: Future = dispatcher.submit([q(1)])
        kept = dispatcher.submit([q(2)])
        assert gone.cancel()
        encoder.release.set()
        assert kept.result(WAIT)[0][0].document["id"] == "d2"
        assert first.result(WAIT)[0][0].document["id"] == "d0"
    finally:
        dispatcher.close()
    assert encoder.calls == [1, 1]


def test_serial_baseline_runs_each_request_alone(retriever: Retriever, encoder: FakeEncoder) -> None:
    metrics = ServerMetrics()
    dispatcher = SerialDispatcher(retriever.retrieve, max_queue=1000, threads=8, metrics=metrics)
    dispatcher.start()
    try:
        futures = [dispatcher.submit([q(i), q(i + 1)]) for i in range(50)]
        for i, future in enumerate(futures):
            assert [hits[0].document["id"] for hits in future.result(WAIT)] == [f"d{i}", f"d{i + 1}"]
    finally:
        dispatcher.close()
    assert encoder.calls == [2] * 50
    assert metrics.batch_size.count == 50
    assert dispatcher.queue_depth == 0


def test_serial_baseline_full_queue(retriever: Retriever, encoder: FakeEncoder) -> None:
    dispatcher = SerialDispatcher(retriever.retrieve, max_queue=2, threads=4)
    dispatcher.start()
    try:
        encoder.release.clear()
        running = dispatcher.submit([q(0)])
        assert encoder.entered.wait(WAIT)
        queued = [dispatcher.submit([q(1)]), dispatcher.submit([q(2)])]
        with pytest.raises(QueueFull):
            dispatcher.submit([q(3)])
        encoder.release.set()
        assert [f.result(WAIT)[0][0].document["id"] for f in (running, *queued)] == ["d0", "d1", "d2"]
    finally:
        dispatcher.close()


# ---------------------------------------------------------------- retriever and the eid filter


def test_topk_order_and_document_fields(retriever: Retriever) -> None:
    (hits,) = retriever.retrieve([q(7, topk=5)])
    assert len(hits) == 5
    assert hits[0].document == {"id": "d7", "content": "document number 7", "lang": "en"}
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True)


def test_restricted_queries_search_deeper(retriever: Retriever) -> None:
    vector = retriever.encoder.encode(["document number 0"], 1)
    _, ranked = retriever.loaded.index.search(vector, 300)
    worst = frozenset(int(r) for r in ranked[0][-4:])  # the four least similar documents
    (hits, small, free) = retriever.retrieve([q(0, topk=3, allowed=worst), q(0, topk=10, allowed=worst), q(0)])
    assert len(hits) == 3 and {retriever.loaded.docs.index(h.document) for h in hits} <= worst
    assert len(small) == 4  # fewer allowed documents than topk: all of them
    assert free[0].document["id"] == "d0"
    assert retriever.retrieve([q(0, allowed=frozenset())]) == [[]]


def test_example_filter(tmp_path: Path) -> None:
    path = tmp_path / "examples.json"
    path.write_text(json.dumps({"e1": ["d1", "d2", "nope"], "7": [3]}))
    filt = ExampleFilter.load(path, {"d1": 1, "d2": 2, "3": 3})
    assert filt.rows_for("e1") == frozenset({1, 2})
    assert filt.rows_for(7) == frozenset({3})
    assert filt.rows_for(None) is None
    with pytest.raises(UnknownEid):
        filt.rows_for("e9")
    path.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="eid -> list"):
        ExampleFilter.load(path, {})
    with pytest.raises(ConfigError, match="no such examples file"):
        ExampleFilter.load(tmp_path / "missing.json", {})


# ---------------------------------------------------------------- index directories


def test_build_then_load_round_trips(tmp_path: Path, encoder: FakeEncoder) -> None:
    built = build_index(corpus(10), tmp_path / "idx", encoder, batch_size=3)
    assert encoder.calls == [3, 3, 3, 1]
    loaded = load_index(tmp_path / "idx")
    assert (loaded.count, loaded.dim) == (10, 32) and loaded.docs == built.docs
    loaded.check_dimension(32, "fake")
    with pytest.raises(IndexDirError, match="dimension 32 does not match the encoder big"):
        loaded.check_dimension(384, "big")
    assert sorted(p.name for p in (tmp_path / "idx").iterdir()) == ["eval.index", "eval.jsonl"]


def test_out_dir_is_never_overwritten_without_force(tmp_path: Path) -> None:
    out = tmp_path / "idx"
    check_out_dir(out, force=False)  # does not exist: fine
    out.mkdir()
    check_out_dir(out, force=False)  # empty: fine
    (out / "eval.index").write_text("x")
    with pytest.raises(IndexDirError, match=r"not empty.*--force"):
        check_out_dir(out, force=False)
    check_out_dir(out, force=True)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("no_dir", "no such index directory"),
        ("empty_dir", "not an index directory"),
        ("no_index", "eval.index: missing"),
        ("no_docs", "eval.jsonl: missing"),
        ("empty_docs", "eval.jsonl: empty file"),
        ("truncated_index", "eval.index: unreadable FAISS index"),
        ("extra_doc", "holds 10 vectors but eval.jsonl has 11 documents"),
        ("bad_doc", "eval.jsonl:3: missing field `content`"),
    ],
)
def test_broken_index_dirs_name_the_problem(tmp_path: Path, encoder: FakeEncoder, damage: str, message: str) -> None:
    out = tmp_path / "idx"
    build_index(corpus(10), out, encoder)
    docs, index = out / "eval.jsonl", out / "eval.index"
    if damage == "no_dir":
        out = tmp_path / "elsewhere"
    elif damage == "empty_dir":
        docs.unlink()
        index.unlink()
    elif damage == "no_index":
        index.unlink()
    elif damage == "no_docs":
        docs.unlink()
    elif damage == "empty_docs":
        docs.write_text("")
    elif damage == "truncated_index":
        index.write_bytes(index.read_bytes()[:100])
    elif damage == "extra_doc":
        docs.write_text(docs.read_text() + json.dumps({"id": "x", "content": "y"}) + "\n")
    elif damage == "bad_doc":
        lines = docs.read_text().splitlines()
        lines[2] = json.dumps({"id": "d2"})
        docs.write_text("\n".join(lines) + "\n")
    with pytest.raises(IndexDirError, match=message.replace("`", ".").replace("(", r"\(")):
        load_index(out)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"id": 1, "content": "a"}\n{"id": 1, "content": "b"}\n', ":2: duplicate id '1'"),
        ('{"id": 1}\n', ":1: missing field `content`"),
        ('{"content": "a"}\n', ":1: missing field `id`"),
        ("not json\n", ":1: not valid JSON"),
        ("\n", "no documents"),
    ],
)
def test_bad_corpus_names_the_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_text(text)
    with pytest.raises(CorpusError) as info:
        read_corpus(path)
    assert message in str(info.value)
