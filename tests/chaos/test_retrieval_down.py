"""A retrieval service that is down is an error, not an answer: `ops eval hle` over sims and a real
retrieval server (`ops serve retrieval`, started and killed by pid). Dead from the start: exactly the
tasks that search fail as `retrieval_unavailable`; killed mid-run: every task that searched after the
kill fails so and no other; then the service back + `--retry-failed` gives exactly the accuracy of an
uninterrupted run, each id once. `--on-retrieval-error continue` keeps the degraded rounds, counted."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("faiss")
pytest.importorskip("sentence_transformers")

from orchestra_ops.services.simllm import agent_rules

from tests.helpers import OPS, free_port, kill_tree, run_ops
from tests.integration.agent_fixtures import BUNDLED, expected, read_jsonl, standard_fleet, text_samples
from tests.integration.eval_fixtures import wait_lines
from tests.integration.retrieval_fixtures import (
    RetrievalServer,
    bundled_index,
    running,
    start_server,
    wait_healthy,
)
from tests.simserver import SimServer

# the first test also waits for the module's stack: the bundled index (built once per session, maybe by
# another worker), a retrieval server loading its encoder and three sims; on a busy 2-core box that alone
# can pass the 300 s default (a hang guard, not a timing claim)
pytestmark = [pytest.mark.retrieval, pytest.mark.timeout(900)]


@dataclass
class Stack:
    work: Path
    index: Path  # the bundled corpus's, shared by the session
    sims: list[SimServer]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    work = tmp_path_factory.mktemp("retrieval-down")
    index = bundled_index(tmp_path_factory, BUNDLED / "agent_corpus.jsonl")
    sims = [SimServer(name, args=["--latency-ms", "3"], log_dir=work)
            for name in ("sim/orchestrator", "sim/experts", "sim/judge")]
    try:
        for sim in sims:
            sim.start()
        yield Stack(work, index, sims)
    finally:
        for sim in sims:
            sim.stop()


def _setup(tmp_path: Path, stack: Stack, samples: list[dict[str, Any]]) -> tuple[list[str], dict[str, str], int]:
    port = free_port()
    home = tmp_path / "ops"
    topology = standard_fleet(home, *stack.sims, {"retrieval": f"127.0.0.1:{port}"})
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(s) + "\n" for s in samples))
    args = ["eval", "hle", "--no-analyze", "--topology", str(topology), "--dataset", str(data), "--run-dir",
            str(tmp_path / "run"), "--exec-workers", "4", "--retrieval-backoff", "0.05"]
    return args, {"OPS_HOME": str(home)}, port


def _server(stack: Stack, port: int) -> RetrievalServer:
    return start_server(stack.index, stack.work / f"retrieval-{port}.log", port=port)


def _searches(sample: dict[str, Any]) -> bool:
    return "search" in agent_rules.plan(sample["question"])


def _check_recovered(tmp_path: Path, args: list[str], env: dict[str, str], samples: list[dict[str, Any]]) -> None:
    again = run_ops([*args, "--retry-failed", "--concurrency", "8"], env=env, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    records = read_jsonl(tmp_path / "run" / "results.jsonl")
    final = {r["id"]: r for r in records}  # the last line of each id wins
    assert set(final) == {s["id"] for s in samples} and all(r["status"] == "ok" for r in final.values())
    ok_lines = [r["id"] for r in records if r["status"] == "ok"]
    assert sorted(ok_lines) == sorted(final)  # each id answered exactly once
    scores = json.loads((tmp_path / "run" / "scores.json").read_text())
    want = expected(samples)
    assert (scores["correct"], scores["errors"], scores["units"]) == (want["correct"], 0, len(samples))
    assert scores["retrieval_degraded"] == {"rounds": 0, "tasks": 0}


def test_dead_from_the_start_fails_exactly_the_searching_tasks(tmp_path: Path, stack: Stack) -> None:
    samples = text_samples(BUNDLED / "hle_synthetic.jsonl")[:16]
    searching = {s["id"] for s in samples if _searches(s)}
    assert 0 < len(searching) < len(samples)
    args, env, port = _setup(tmp_path, stack, samples)
    first = run_ops([*args, "--concurrency", "8"], env=env, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    records = {r["id"]: r for r in read_jsonl(tmp_path / "run" / "results.jsonl")}
    failed = {i for i, r in records.items() if r["status"] == "error"}
    assert failed == searching
    assert {records[i]["error_type"] for i in failed} == {"retrieval_unavailable"}
    assert all(f"127.0.0.1:{port}" in records[i]["error"] for i in failed)
    scores = json.loads((tmp_path / "run" / "scores.json").read_text())
    assert scores["errors_by_type"] == {"retrieval_unavailable": len(searching)}
    log = (tmp_path / "run" / "eval.log").read_text()  # the score lines: eval.log (the console with -v)
    assert f"errors counted as wrong: {len(searching)} (retrieval_unavailable {len(searching)})" in log

    server = _server(stack, port)
    with running(server):
        _check_recovered(tmp_path, args, env, samples)


def test_killed_mid_run_fails_what_searched_after_and_retry_recovers(tmp_path: Path, stack: Stack) -> None:
    samples = text_samples(BUNDLED / "hle_synthetic.jsonl")[:40]
    searching = {s["id"] for s in samples if _searches(s)}
    args, env, port = _setup(tmp_path, stack, samples)
    server = _server(stack, port)
    wait_healthy(server)
    results = tmp_path / "run" / "results.jsonl"
    proc = subprocess.Popen([*OPS, *args, "--concurrency", "2"], env={**os.environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_lines(results, 6, proc, timeout_s=300)
        kill_tree(server.proc.pid)  # the service dies with the run in flight
        done_before = {json.loads(line)["id"] for line in results.read_text().splitlines() if line.endswith("}")}
        _, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            kill_tree(proc.pid)
    assert proc.returncode == 0, err[-3000:]
    records = {r["id"]: r for r in read_jsonl(results)}
    assert set(records) == {s["id"] for s in samples}
    failed = {i for i, r in records.items() if r["status"] == "error"}
    assert failed and failed <= searching - done_before  # only tasks that searched after the kill
    assert {records[i]["error_type"] for i in failed} == {"retrieval_unavailable"}
    tail = {s["id"] for s in samples[-10:]}  # started well after the kill: each of those that searches failed
    assert searching & tail <= failed
    scores = json.loads((tmp_path / "run" / "scores.json").read_text())
    assert scores["errors_by_type"] == {"retrieval_unavailable": len(failed)}
    assert scores["ok"] == len(samples) - len(failed)

    back = _server(stack, port)
    with running(back):
        _check_recovered(tmp_path, args, env, samples)


def test_continue_keeps_degraded_rounds_and_counts_them(tmp_path: Path, stack: Stack) -> None:
    samples = [s for s in text_samples(BUNDLED / "hle_synthetic.jsonl") if _searches(s)][:4]
    args, env, _ = _setup(tmp_path, stack, samples)
    result = run_ops([*args, "--on-retrieval-error", "continue", "--max-rounds", "4", "--retrieval-attempts", "2"],
                     env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    records = read_jsonl(tmp_path / "run" / "results.jsonl")
    assert {r["status"] for r in records} == {"ok"}
    rounds = sum(1 for r in records for c in r["calls"] if c.get("retrieval_error"))
    assert rounds >= len(samples)
    scores = json.loads((tmp_path / "run" / "scores.json").read_text())
    assert scores["retrieval_degraded"] == {"rounds": rounds, "tasks": len(samples)}
    assert (f"retrieval unavailable: {rounds} search round(s) in {len(samples)} task(s) went on without documents"
            in (tmp_path / "run" / "eval.log").read_text())
    analyzed = run_ops(["analyze", str(tmp_path / "run")], timeout=300)
    assert analyzed.returncode == 0, analyzed.stderr
    report = (tmp_path / "run" / "analysis" / "report.html").read_text()
    assert f"<td>retrieval_degraded.rounds (scores.json)</td><td>{rounds}</td>" in report
    assert "the rounds went on without documents (degraded)" in report
