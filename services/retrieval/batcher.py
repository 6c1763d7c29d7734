"""Who runs the retriever: a micro-batching queue with one worker, or the one-at-a-time baseline.

BatchingDispatcher (`--batching on`)::

    submit() ──> bounded queue ──> worker thread (owns encoder + index)
                                   waits until max_batch_size queries are queued or the oldest
                                   request has waited max_wait, then retrieve(batch) once and
                                   hands each request its own slice of the results

SerialDispatcher (`--batching off`): each request is encoded and searched alone under one global
lock (what a plain FastAPI server with a locked FAISS index does).

Both raise QueueFull when max_queue requests already wait; the server answers 503 + Retry-After.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from .metrics import ServerMetrics
from .search import Hit, Query

log = logging.getLogger(__name__)

RunBatch = Callable[[Sequence[Query]], list[list[Hit]]]
Results = list[list[Hit]]


class QueueFull(Exception):
    """The queue holds max_queue requests already."""

    def __init__(self, depth: int) -> None:
        super().__init__(f"retrieval queue full ({depth} requests waiting)")
        self.depth = depth


class DispatcherClosed(RuntimeError):
    """The server is shutting down; no more requests are taken."""


class Dispatcher(Protocol):
    def start(self) -> None: ...

    def close(self) -> None: ...

    def submit(self, queries: Sequence[Query]) -> Future[Results]: ...

    @property
    def queue_depth(self) -> int: ...

    @property
    def queued_queries(self) -> int: ...

    def is_alive(self) -> bool: ...


@dataclass
class _Job:
    queries: Sequence[Query]
    future: Future[Results] = field(default_factory=Future)
    enqueued: float = field(default_factory=time.monotonic)


class BatchingDispatcher:
    """A bounded queue in front of one worker thread that runs `run_batch` on micro-batches."""

    def __init__(
        self,
        run_batch: RunBatch,
        *,
        max_batch_size: int = 64,
        max_wait_s: float = 0.005,
        max_queue: int = 4096,
        metrics: ServerMetrics | None = None,
    ) -> None:
        self._run_batch = run_batch
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_s
        self.max_queue = max_queue
        self._metrics = metrics
        self._queue: deque[_Job] = deque()
        self._queued_queries = 0
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="retrieval-batcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        """Stop the worker; requests still queued fail with DispatcherClosed."""
        with self._cond:
            self._closed = True
            left = list(self._queue)
            self._queue.clear()
            self._queued_queries = 0
            self._cond.notify_all()
        for job in left:
            if job.future.set_running_or_notify_cancel():
                job.future.set_exception(DispatcherClosed("retrieval server shutting down"))
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    @property
    def queue_depth(self) -> int:
        return len(self._queue)

    @property
    def queued_queries(self) -> int:
        return self._queued_queries

    def submit(self, queries: Sequence[Query]) -> Future[Results]:
        job = _Job(queries)
        with self._cond:
            if self._closed:
                raise DispatcherClosed("retrieval server shutting down")
            if len(self._queue) >= self.max_queue:
                raise QueueFull(len(self._queue))
            self._queue.append(job)
            self._queued_queries += len(queries)
            self._cond.notify()
        return job.future

    def _loop(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            self._run(batch)

    def _next_batch(self) -> list[_Job] | None:
        """Block until a batch is due (full, or its oldest request waited max_wait); take it."""
        with self._cond:
            while not self._closed:
                if not self._queue:
                    self._cond.wait()
                    continue
                wait = self._queue[0].enqueued + self.max_wait_s - time.monotonic()
                if self._queued_queries >= self.max_batch_size or wait <= 0:
                    break
                self._cond.wait(timeout=wait)
            if self._closed:
                return None
            batch: list[_Job] = []
            size = 0
            while self._queue and (not batch or size + len(self._queue[0].queries) <= self.max_batch_size):
                job = self._queue.popleft()
                size += len(job.queries)
                self._queued_queries -= len(job.queries)
                batch.append(job)
            return batch

    def _run(self, batch: list[_Job]) -> None:
        jobs = [job for job in batch if job.future.set_running_or_notify_cancel()]  # skip cancelled
        queries = [q for job in jobs for q in job.queries]
        if not queries:
            for job in jobs:
                job.future.set_result([])
            return
        if self._metrics is not None:
            self._metrics.batch_size.observe(len(queries))
        try:
            results = self._run_batch(queries)
        except Exception as exc:  # the worker must survive a bad batch; each caller gets the error
            log.exception("retrieval batch of %d queries failed", len(queries))
            for job in jobs:
                job.future.set_exception(exc)
            return
        start = 0
        for job in jobs:
            end = start + len(job.queries)
            job.future.set_result(results[start:end])
            start = end


class SerialDispatcher:
    """The baseline: every request encoded and searched alone, one at a time, under a global lock."""

    def __init__(
        self, run_batch: RunBatch, *, max_queue: int = 4096, threads: int = 40, metrics: ServerMetrics | None = None
    ) -> None:
        self._run_batch = run_batch
        self.max_queue = max_queue
        self._metrics = metrics
        self._lock = threading.Lock()
        self._count_lock = threading.Lock()
        self._waiting = 0
        self._waiting_queries = 0
        self._threads = threads
        self._pool: ThreadPoolExecutor | None = None

    def start(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=self._threads, thread_name_prefix="retrieval-serial")

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def is_alive(self) -> bool:
        return self._pool is not None

    @property
    def queue_depth(self) -> int:
        return self._waiting

    @property
    def queued_queries(self) -> int:
        return self._waiting_queries

    def submit(self, queries: Sequence[Query]) -> Future[Results]:
        if self._pool is None:
            raise DispatcherClosed("retrieval dispatcher not running")
        with self._count_lock:
            if self._waiting >= self.max_queue:
                raise QueueFull(self._waiting)
            self._waiting += 1
            self._waiting_queries += len(queries)
        future = self._pool.submit(self._run, queries)
        future.add_done_callback(lambda done: self._forget(done, len(queries)))
        return future

    def _forget(self, future: Future[Results], n_queries: int) -> None:
        """A request cancelled before it ran (client gone, shutdown) no longer waits."""
        if future.cancelled():
            with self._count_lock:
                self._waiting -= 1
                self._waiting_queries -= n_queries

    def _run(self, queries: Sequence[Query]) -> Results:
        with self._lock:
            with self._count_lock:
                self._waiting -= 1
                self._waiting_queries -= len(queries)
            if self._metrics is not None:
                self._metrics.batch_size.observe(len(queries))
            return self._run_batch(queries)
