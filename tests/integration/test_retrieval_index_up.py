"""A retrieval service's index at `ops plan` / `ops up`: a missing index without a corpus is a located
error before anything starts; with `corpus:` the first `ops up` builds it (with progress) under the
topology's state dir ($OPS_HOME), as `ops index build` would, and the service serves it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.helpers import REPO, free_port, run_ops
from tests.retrieval_data import write_corpus


def _topology(path: Path, service: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump({
        "name": "ix", "backend": "local", "defaults": {"ulimit_nofile": 4096, "ready_timeout_s": 300},
        "nodes": {"cpu": {"host": "localhost", "gpus": 0}},
        "services": {"retrieval": {"kind": "retrieval", "node": "cpu", "port": free_port(), **service}}},
        sort_keys=False))
    return path


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "home"
    if (tmp_path / "home" / "ix" / "state.json").exists():
        run_ops(["down", "ix", "--timeout", "5"], env={"OPS_HOME": str(tmp_path / "home")}, cwd=tmp_path)


def _line(path: Path, text: str) -> int:
    """The 1-based line of the first line of `path` that contains `text`."""
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.mark.parametrize(("service", "key", "message"), [
    ({"index_dir": "nowhere"}, "index_dir:",
     "services.retrieval.index_dir: nowhere: no index there (no eval.index); declare corpus: (a JSONL of id + "
     "content; `ops up` builds the index from it) or build one with `ops index build CORPUS --out nowhere`"),
    ({}, "retrieval:", "services.retrieval: no index_dir and no corpus; declare corpus:"),
    ({"corpus": "missing.jsonl"}, "corpus:", "services.retrieval.corpus: missing.jsonl: no such file (relative to "),
])
def test_a_missing_index_is_a_located_error_before_anything_starts(tmp_path: Path, home: Path,
                                                                    service: dict[str, Any], key: str,
                                                                    message: str) -> None:
    topology = _topology(tmp_path / "ix.yaml", service)
    line = _line(topology, key)
    for command in (["plan", str(topology)], ["up", str(topology)]):
        result = run_ops(command, env={"OPS_HOME": str(home)}, cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert f"{topology}:{line}: {message}" in result.stderr and "Traceback" not in result.stderr
    assert not (home / "ix").exists()  # nothing was started, no state written


def test_the_embedded_default_plans_its_index_under_ops_home(tmp_path: Path) -> None:
    result = run_ops(["plan", "topologies/local.yaml"], env={"OPS_HOME": str(tmp_path / "h")}, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert (f"note: retrieval: `ops up` builds its index in {tmp_path / 'h' / 'local' / 'index' / 'retrieval'} "
            "from evals/agent/data/agent_corpus.jsonl") in result.stderr


@pytest.mark.retrieval
def test_up_builds_the_missing_index_from_the_corpus_then_serves_it(tmp_path: Path, home: Path) -> None:
    pytest.importorskip("faiss")
    pytest.importorskip("sentence_transformers")
    docs = write_corpus(tmp_path / "corpus.jsonl", 40)
    topology = _topology(tmp_path / "ix.yaml", {"corpus": "corpus.jsonl"})
    up = run_ops(["up", str(topology)], env={"OPS_HOME": str(home)}, cwd=tmp_path, timeout=600)
    assert up.returncode == 0, up.stderr
    index = home / "ix" / "index" / "retrieval"
    assert "building the index of retrieval: 0/40 documents" in up.stderr
    assert "building the index of retrieval: 40/40 documents" in up.stderr
    assert sorted(p.name for p in index.iterdir()) == ["eval.index", "eval.jsonl"]
    assert [json.loads(line)["id"] for line in (index / "eval.jsonl").read_text().splitlines()] == \
        [d["id"] for d in docs]
    port = json.loads((home / "ix" / "model_config.json").read_text())["retrieval"][0]["port"]
    answer = httpx.post(f"http://127.0.0.1:{port}/retrieve", json={"queries": [docs[3]["content"]], "topk": 1,
                                                                     "return_scores": True}, timeout=60).json()
    assert answer[0][0]["document"]["id"] == docs[3]["id"]

    assert run_ops(["down", "ix"], env={"OPS_HOME": str(home)}, cwd=tmp_path).returncode == 0
    again = run_ops(["up", str(topology)], env={"OPS_HOME": str(home)}, cwd=tmp_path, timeout=600)
    assert again.returncode == 0, again.stderr
    assert "building the index" not in again.stderr  # built once: the second up finds it
