"""The README's declared-adapter flow on real simulated replicas: a model with `lora_modules: {ft: DIR}`,
`ops up`, then `ops eval gsm8k --model answer --model ft`: the endpoints file lists the adapter on its
base model's replicas and both score exactly what the sim's rules predict."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from orchestra_ops.services.simllm import opencompass_rules as br

from tests.adapters import make_adapter
from tests.helpers import free_port_block, run_ops
from tests.integration.test_opencompass_suites import oc_gsm8k_correct, oc_gsm8k_gold, oc_gsm8k_pred

BASE = "sim/base"


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    for state in (tmp_path / "home").glob("*/state.json"):
        run_ops(["down", state.parent.name, "--timeout", "5"], env={"OPS_HOME": str(tmp_path / "home")},
                cwd=tmp_path, timeout=60)


def test_declared_adapter_is_in_the_endpoints_file_and_evaluates(workdir: Path) -> None:
    make_adapter(workdir / "adapters" / "ft", r=8)
    port = free_port_block(2)
    topology = workdir / "ld.yaml"
    topology.write_text(yaml.safe_dump({
        "name": "ld", "backend": "local", "defaults": {"ulimit_nofile": 4096, "ready_timeout_s": 120},
        "nodes": {"cpu": {"host": "localhost", "gpus": 0}},
        "models": {"answer": {"model": BASE, "engine": "sim", "node": "cpu", "replicas": 2, "gpus_per_replica": 0,
                              "port": port, "max_lora_rank": 64, "lora_modules": {"ft": "adapters/ft"},
                              "sim": {"latency_ms": 1}}},
        "roles": {"candidate": "answer"}}))
    env = {"OPS_HOME": str(workdir / "home")}
    up = run_ops(["up", str(topology)], env=env, cwd=workdir, timeout=180)
    assert up.returncode == 0, up.stderr
    replicas = [{"ip_addr": "127.0.0.1", "port": p} for p in (port, port + 1)]
    assert json.loads((workdir / "home" / "ld" / "model_config.json").read_text()) == {BASE: replicas,
                                                                                        "ft": replicas}

    questions = [f"Declared problem {i}: how many parcels remain in the depot?" for i in range(24)]
    lines = [json.dumps({"question": q, "answer": f"Worked.\n#### {br.gsm8k_truth(q)}"}) for q in questions]
    (workdir / "gsm8k").mkdir()
    (workdir / "gsm8k" / "test.jsonl").write_text("\n".join(lines) + "\n")
    run = run_ops(["eval", "gsm8k", "--no-analyze", "--model", "answer", "--model", "ft", "--dataset", "gsm8k",
                   "--run-dir", "run"], env=env, cwd=workdir, timeout=180)
    assert run.returncode == 0, run.stderr

    golds = [oc_gsm8k_gold(json.loads(line)["answer"]) for line in lines]
    expected = {}
    for name, served in (("answer", BASE), ("ft", "ft")):
        right = [oc_gsm8k_correct(oc_gsm8k_pred(br.gsm8k_reply(served, q)), gold)
                 for q, gold in zip(questions, golds, strict=True)]
        expected[name] = 100 * sum(right) / len(right)
    assert expected["answer"] != expected["ft"]  # the adapter really answered, not the base model
    got = json.loads((workdir / "run" / "scores.json").read_text())["datasets"]["gsm8k"]
    assert {name: got[name]["accuracy"] for name in ("answer", "ft")} == expected
    assert {name: (got[name]["n"], got[name]["failed"]) for name in ("answer", "ft")} == {
        "answer": (24, 0), "ft": (24, 0)}
