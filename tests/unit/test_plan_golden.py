"""The plan of the real HLE fleet, checked against the exact commands people ran by hand."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from orchestra_ops.config.loader import load_topology
from orchestra_ops.fleet.endpoints import endpoints_for
from orchestra_ops.fleet.plan import LaunchPlan, plan

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"


@pytest.fixture(scope="module")
def hle() -> LaunchPlan:
    return plan(load_topology(TOPOLOGIES / "hle_oss.yaml"), state_dir="/state/hle-oss")


def test_hle_has_26_processes(hle: LaunchPlan) -> None:
    assert len(hle.processes) == 26
    counts: dict[str, int] = defaultdict(int)
    for spec in hle.processes:
        counts[spec.group] += 1
    assert dict(counts) == {"orchestrator": 4, "coder": 8, "answer": 8, "search": 4,
                            "retrieval": 1, "wiki_retrieval": 1}


def test_exact_argv_one_replica_per_model(hle: LaunchPlan) -> None:
    assert list(hle.by_name("orchestrator/2").argv) == [
        "vllm", "serve", "/models/nvidia/Nemotron-Orchestrator-8B/", "--host", "0.0.0.0", "--port", "1802",
        "--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--gpu-memory-utilization", "0.85"]
    assert list(hle.by_name("coder/7").argv) == [
        "vllm", "serve", "Qwen/Qwen2.5-Coder-14B-Instruct", "--host", "0.0.0.0", "--port", "1817",
        "--gpu-memory-utilization", "0.9"]
    assert list(hle.by_name("answer/0").argv) == [
        "vllm", "serve", "Qwen/Qwen3-32B-FP8", "--host", "0.0.0.0", "--port", "1820",
        "--gpu-memory-utilization", "0.9", "--max-model-len", "32768"]
    assert list(hle.by_name("search/3").argv) == [
        "vllm", "serve", "openai/gpt-oss-20b", "--host", "0.0.0.0", "--port", "1843",
        "--enable-auto-tool-choice", "--tool-call-parser", "openai", "--gpu-memory-utilization", "0.9"]
    assert list(hle.by_name("retrieval").argv) == [
        "ops", "serve", "retrieval", "--index-dir", "/data/hle_index", "--host", "0.0.0.0", "--port", "8765",
        "--device", "cuda", "--max-batch-size", "64", "--max-wait-ms", "5", "--max-queue", "4096",
        "--batching", "on"]


def test_hosts_ports_and_gpus(hle: LaunchPlan) -> None:
    orch = [hle.by_name(f"orchestrator/{i}") for i in range(4)]
    assert [(s.host, s.port, s.gpus) for s in orch] == [
        ("research-secure-05", 1800 + i, (i,)) for i in range(4)]
    assert {hle.by_name(f"coder/{i}").host for i in range(8)} == {"research-secure-11"}
    assert [hle.by_name(f"answer/{i}").port for i in range(8)] == list(range(1820, 1828))
    assert {hle.by_name(f"search/{i}").host for i in range(4)} == {"172.27.31.10"}
    assert (hle.by_name("retrieval").gpus, hle.by_name("wiki_retrieval").gpus) == ((0,), (1,))
    assert hle.by_name("wiki_retrieval").port == 8766
    assert hle.by_name("search/1").health_url == "http://172.27.31.10:1841/health"


def test_distinct_devices_and_cache_per_replica_on_each_node(hle: LaunchPlan) -> None:
    by_node: dict[str, list] = defaultdict(list)
    for spec in hle.processes:
        by_node[spec.node].append(spec)
    for node, specs in by_node.items():
        devices = [s.env["CUDA_VISIBLE_DEVICES"] for s in specs]
        assert len(set(devices)) == len(devices), node
        caches = [s.env["VLLM_CACHE_ROOT"] for s in specs if s.kind == "vllm"]
        assert len(set(caches)) == len(caches), node
    assert hle.by_name("answer/5").env == {
        "CUDA_VISIBLE_DEVICES": "5", "PYTHONUNBUFFERED": "1",
        "VLLM_CACHE_ROOT": "/tmp/orchestra-ops/vllm-cache/hle-oss/answer-5"}


def test_logs_live_in_the_state_dir(hle: LaunchPlan) -> None:
    assert hle.by_name("orchestrator/2").log == "/state/hle-oss/logs/orchestrator-2.log"
    assert len({s.log for s in hle.processes}) == 26


def test_endpoints_file_shape(hle: LaunchPlan) -> None:
    endpoints = endpoints_for(hle)
    assert list(endpoints) == ["/models/nvidia/Nemotron-Orchestrator-8B/", "Qwen/Qwen2.5-Coder-14B-Instruct",
                               "Qwen/Qwen3-32B-FP8", "openai/gpt-oss-20b", "retrieval", "wiki_retrieval"]
    assert endpoints["Qwen/Qwen3-32B-FP8"][:2] == [{"ip_addr": "research-secure-12", "port": 1820},
                                                   {"ip_addr": "research-secure-12", "port": 1821}]
    assert endpoints["retrieval"] == [{"ip_addr": "research-secure-13", "port": 8765}]
    assert all(isinstance(e["port"], int) for items in endpoints.values() for e in items)


def test_roles_and_request_defaults() -> None:
    topology = load_topology(TOPOLOGIES / "hle_oss.yaml")
    assert topology.roles == {"orchestrator": "orchestrator", "search": "search", "reasoner": "coder",
                              "answer": "answer", "judge": "judge"}
    assert topology.models["answer"].request_defaults == {"chat_template_kwargs": {"enable_thinking": False}}
    judge = topology.providers["judge"]
    assert (judge.model, judge.api_key_env) == ("gpt-5", "OPENAI_API_KEY")


def test_sim_and_tensor_parallel_commands() -> None:
    local = plan(load_topology(TOPOLOGIES / "local.yaml"), state_dir="/s")
    spec = local.by_name("orchestrator/1")
    assert (spec.host, spec.bind_host, spec.port, spec.gpus) == ("127.0.0.1", "127.0.0.1", 18101, ())
    assert list(spec.argv) == [
        "ops", "serve", "sim", "--host", "127.0.0.1", "--port", "18101", "--model", "sim/orchestrator-8b",
        "--max-model-len", "32768", "--latency-ms", "50", "--prefill-ms-per-token", "0",
        "--decode-ms-per-token", "0.5", "--jitter", "0.1", "--startup-delay-s", "0", "--seed", "2"]
    slurm = plan(load_topology(TOPOLOGIES / "slurm_example.yaml"), state_dir="/s")
    search = slurm.by_name("search/1")
    assert search.host is None and search.gpus == (2, 3)
    assert search.argv[-2:] == ("--tensor-parallel-size", "2")
    resolved = slurm.with_hosts({"gpu8": "node017", "gpu4": "node042"})
    assert resolved.hosts_resolved
    assert resolved.by_name("search/1").health_url == "http://node042:1841/health"
