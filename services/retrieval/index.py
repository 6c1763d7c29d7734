"""Index directories: `eval.index` (FAISS, inner product over normalized vectors) + `eval.jsonl`.

Row i of the index is line i of eval.jsonl. A directory that is missing, partial (one file, an
empty or unreadable file) or inconsistent (count or dimension) is an IndexDirError naming the file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from orchestra_ops.errors import ConfigError

from .encoder import TextEncoder

log = logging.getLogger(__name__)

INDEX_FILE = "eval.index"
DOCS_FILE = "eval.jsonl"

Document = dict[str, Any]


class IndexDirError(ConfigError):
    """An index directory that is missing, partial, unreadable or inconsistent."""


class CorpusError(ConfigError):
    """A corpus file that cannot be indexed (bad JSON, a missing id/content, a duplicate id)."""


@dataclass
class LoadedIndex:
    """An index directory in memory: the FAISS index and its documents, row-aligned."""

    path: Path
    index: Any  # faiss.Index
    docs: list[Document]
    gpu_resources: Any = None  # kept alive while a GPU index uses it

    @property
    def dim(self) -> int:
        return int(self.index.d)

    @property
    def count(self) -> int:
        return int(self.index.ntotal)

    def row_of_id(self) -> dict[str, int]:
        """Document id (as a string) -> row."""
        return {str(doc["id"]): row for row, doc in enumerate(self.docs)}

    def check_dimension(self, encoder_dim: int, encoder_name: str) -> None:
        if encoder_dim != self.dim:
            raise IndexDirError(
                f"{self.path / INDEX_FILE}: index dimension {self.dim} does not match the encoder "
                f"{encoder_name} (dimension {encoder_dim}); rebuild it with `ops index build` "
                "and the same --encoder"
            )


# ---------------------------------------------------------------- reading a corpus


def read_corpus(path: Path) -> list[Document]:
    """The documents of a corpus JSONL (one object per line with `id` and `content`; other fields kept)."""
    if not path.is_file():
        raise CorpusError(f"{path}: no such corpus file")
    docs = list(_read_docs(path, error=CorpusError))
    if not docs:
        raise CorpusError(f"{path}: the corpus has no documents")
    return docs


def _read_docs(path: Path, error: type[ConfigError]) -> Iterator[Document]:
    seen: dict[str, int] = {}
    with path.open(encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                doc = json.loads(line)
            except json.JSONDecodeError as exc:
                raise error(f"{where}: not valid JSON ({exc.msg})") from None
            if not isinstance(doc, dict):
                raise error(f"{where}: expected a JSON object with `id` and `content`")
            doc_id = doc.get("id")
            if doc_id is None or isinstance(doc_id, (bool, dict, list)):
                raise error(f"{where}: missing field `id` (a string or an integer)")
            if not isinstance(doc.get("content"), str):
                raise error(f"{where}: missing field `content` (a string)")
            key = str(doc_id)
            if key in seen:
                raise error(f"{where}: duplicate id {key!r} (first on line {seen[key]})")
            seen[key] = lineno
            yield doc


# ---------------------------------------------------------------- building


def check_out_dir(out_dir: Path, force: bool) -> None:
    """Refuse to write into a directory that already holds files, unless `force`."""
    if out_dir.exists() and not out_dir.is_dir():
        raise IndexDirError(f"{out_dir}: exists and is not a directory")
    if force or not out_dir.exists():
        return
    existing = sorted(p.name for p in out_dir.iterdir())
    if existing:
        shown = ", ".join(existing[:5]) + (", …" if len(existing) > 5 else "")
        raise IndexDirError(
            f"{out_dir}: not empty ({shown}); pass --force to replace {INDEX_FILE} and {DOCS_FILE} there"
        )


def build_index(
    docs: list[Document],
    out_dir: Path,
    encoder: TextEncoder,
    *,
    batch_size: int = 256,
    on_progress: Callable[[int], None] | None = None,
) -> LoadedIndex:
    """Encode `docs`, write eval.index + eval.jsonl into `out_dir` (each file replaced atomically)."""
    index = faiss.IndexFlatIP(encoder.dim)
    for start in range(0, len(docs), batch_size):
        chunk = docs[start : start + batch_size]
        vectors = encoder.encode([doc["content"] for doc in chunk], batch_size)
        index.add(np.ascontiguousarray(vectors, dtype=np.float32))
        if on_progress is not None:
            on_progress(len(chunk))
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp_docs = _temp_path(out_dir, DOCS_FILE)
    tmp_index = _temp_path(out_dir, INDEX_FILE)
    try:
        with tmp_docs.open("w", encoding="utf-8") as handle:
            for doc in docs:
                handle.write(json.dumps(doc, ensure_ascii=False) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        faiss.write_index(index, str(tmp_index))
        os.replace(tmp_docs, out_dir / DOCS_FILE)
        os.replace(tmp_index, out_dir / INDEX_FILE)
    finally:
        for tmp in (tmp_docs, tmp_index):
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
    log.info("wrote %d documents (dimension %d) to %s", index.ntotal, index.d, out_dir)
    return LoadedIndex(path=out_dir, index=index, docs=docs)


def _temp_path(directory: Path, name: str) -> Path:
    """A sibling temp name (created with the usual umask, unlike mkstemp's 0600)."""
    return directory / f".{name}.{os.getpid()}.tmp"


# ---------------------------------------------------------------- loading


def load_index(index_dir: Path) -> LoadedIndex:
    """Read an index directory, checking it is complete and consistent (no encoder needed)."""
    if not index_dir.exists():
        raise IndexDirError(f"{index_dir}: no such index directory (build one with `ops index build`)")
    if not index_dir.is_dir():
        raise IndexDirError(f"{index_dir}: not a directory")
    index_path, docs_path = index_dir / INDEX_FILE, index_dir / DOCS_FILE
    missing = [p.name for p in (index_path, docs_path) if not p.is_file()]
    if len(missing) == 2:
        raise IndexDirError(
            f"{index_dir}: not an index directory (no {INDEX_FILE}, no {DOCS_FILE}); build one with `ops index build`"
        )
    if missing:
        raise IndexDirError(
            f"{index_dir / missing[0]}: missing; the index directory is partial "
            "(rebuild it with `ops index build --force`)"
        )
    for path in (index_path, docs_path):
        if path.stat().st_size == 0:
            raise IndexDirError(f"{path}: empty file; the index directory is partial")
    try:
        index = faiss.read_index(str(index_path))
    except RuntimeError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise IndexDirError(f"{index_path}: unreadable FAISS index (truncated or not an index?): {reason}") from None
    docs = list(_read_docs(docs_path, error=IndexDirError))
    if int(index.ntotal) != len(docs):
        raise IndexDirError(
            f"{index_dir}: {INDEX_FILE} holds {index.ntotal} vectors but {DOCS_FILE} "
            f"has {len(docs)} documents; rebuild it with `ops index build --force`"
        )
    if index.metric_type != faiss.METRIC_INNER_PRODUCT:
        log.warning("%s: the index does not use inner product; scores are not cosine similarities", index_path)
    return LoadedIndex(path=index_dir, index=index, docs=docs)


def to_device(loaded: LoadedIndex, device: str) -> None:
    """Move the index to GPU 0 when asked and this FAISS build can; otherwise it stays on the CPU."""
    if device != "cuda":
        return
    if not hasattr(faiss, "StandardGpuResources") or faiss.get_num_gpus() < 1:
        log.warning("--device cuda: this FAISS build has no GPU support; the index stays on the CPU")
        return
    resources = faiss.StandardGpuResources()
    loaded.index = faiss.index_cpu_to_gpu(resources, 0, loaded.index)
    loaded.gpu_resources = resources
