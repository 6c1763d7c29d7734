"""`ops serve retrieval` / `ops index build` refuse bad input with a reason and no traceback."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
faiss = pytest.importorskip("faiss")

from tests.helpers import free_port, run_ops  # noqa: E402

pytestmark = pytest.mark.retrieval


def serve(index_dir: Path, *extra: str, port: int | None = None) -> tuple[int, str]:
    result = run_ops(
        ["serve", "retrieval", "--index-dir", str(index_dir), "--port", str(port or free_port()), *extra],
        timeout=180,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, result.stderr


def write_index(index_dir: Path, vectors: int, docs: int, dim: int = 384) -> None:
    index_dir.mkdir(parents=True, exist_ok=True)
    index = faiss.IndexFlatIP(dim)
    index.add(np.random.default_rng(0).standard_normal((vectors, dim)).astype(np.float32))
    faiss.write_index(index, str(index_dir / "eval.index"))
    lines = [json.dumps({"id": f"d{i}", "content": f"text {i}"}) for i in range(docs)]
    (index_dir / "eval.jsonl").write_text("\n".join(lines) + "\n")


def test_missing_index_dir(tmp_path: Path) -> None:
    code, err = serve(tmp_path / "nowhere")
    assert code == 2 and "nowhere: no such index directory" in err


def test_partial_index_dir(tmp_path: Path) -> None:
    write_index(tmp_path / "idx", 3, 3)
    (tmp_path / "idx" / "eval.index").unlink()
    code, err = serve(tmp_path / "idx")
    assert code == 2 and "eval.index: missing" in err and "partial" in err


def test_truncated_index_file(tmp_path: Path) -> None:
    write_index(tmp_path / "idx", 3, 3)
    path = tmp_path / "idx" / "eval.index"
    path.write_bytes(path.read_bytes()[:64])
    code, err = serve(tmp_path / "idx")
    assert code == 2 and "eval.index: unreadable FAISS index" in err


def test_count_mismatch(tmp_path: Path) -> None:
    write_index(tmp_path / "idx", 5, 4)
    code, err = serve(tmp_path / "idx")
    assert code == 2 and "holds 5 vectors but eval.jsonl has 4 documents" in err


def test_dimension_mismatch_with_the_encoder(tmp_path: Path) -> None:
    write_index(tmp_path / "idx", 3, 3, dim=8)
    code, err = serve(tmp_path / "idx")
    assert code == 2 and "index dimension 8 does not match the encoder" in err and "(dimension 384)" in err


def test_bad_examples_file(tmp_path: Path) -> None:
    write_index(tmp_path / "idx", 3, 3)
    (tmp_path / "examples.json").write_text("{oops")
    code, err = serve(tmp_path / "idx", "--examples", str(tmp_path / "examples.json"))
    assert code == 2 and "examples.json:1: not valid JSON" in err


def test_port_taken(tmp_path: Path) -> None:
    write_index(tmp_path / "idx", 3, 3)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", free_port()))
        taken.listen()
        code, err = serve(tmp_path / "idx", port=taken.getsockname()[1])
    assert code == 3 and "cannot listen on 127.0.0.1" in err


def test_index_build_never_overwrites_silently(tmp_path: Path) -> None:
    (tmp_path / "corpus.jsonl").write_text(json.dumps({"id": 1, "content": "a"}) + "\n")
    out = tmp_path / "idx"
    out.mkdir()
    (out / "eval.index").write_text("precious")
    result = run_ops(["index", "build", str(tmp_path / "corpus.jsonl"), "--out", str(out)])
    assert result.returncode == 2 and "not empty" in result.stderr and "--force" in result.stderr
    assert "Traceback" not in result.stderr
    assert (out / "eval.index").read_text() == "precious"


def test_index_build_names_the_bad_corpus_line(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": 1, "content": "a"}) + "\n" + json.dumps({"id": 2}) + "\n")
    result = run_ops(["index", "build", str(corpus), "--out", str(tmp_path / "idx")])
    assert result.returncode == 2 and "corpus.jsonl:2: missing field `content`" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "idx").exists()


def test_cli_import_stays_light() -> None:
    import subprocess
    import sys

    heavy = "{'torch', 'faiss', 'fastapi', 'sentence_transformers', 'uvicorn'}"
    code = f"import sys, orchestra_ops.cli; print(sorted({heavy} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
