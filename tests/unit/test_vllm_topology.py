"""The CPU build of vLLM in a topology: vllm_command per node/model, one core set per replica, parsers."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from orchestra_ops.config.loader import load_topology
from orchestra_ops.errors import TopologyError
from orchestra_ops.fleet.plan import plan

CPU_NODE = """\
name: t
backend: local
nodes:
  cpu: {host: localhost, gpus: 0, cpus: 4, vllm_command: [/opt/venv/bin/vllm]}
  gpu: {host: localhost, gpus: 2}
"""


def _load(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "t.yaml"
    path.write_text(textwrap.dedent(text))
    return load_topology(path)


def test_each_cpu_replica_gets_its_own_cores_and_the_nodes_vllm(tmp_path: Path) -> None:
    topology = _load(tmp_path, CPU_NODE + """\
models:
  a: {model: /m/a, node: cpu, replicas: 2, gpus_per_replica: 0, port: 9000, reasoning_parser: qwen3}
  b: {model: /m/b, node: cpu, gpus_per_replica: 0, cpus_per_replica: 2, port: 9010,
      vllm_command: [python3, -m, vllm.entrypoints.cli.main]}
  g: {model: /m/g, node: gpu, port: 9020}
""")
    specs = {spec.name: spec for spec in plan(topology, state_dir=tmp_path).processes}
    assert [specs[n].env.get("VLLM_CPU_OMP_THREADS_BIND") for n in ("a/0", "a/1", "b/0", "g/0")] == \
        ["0", "1", "2-3", None]
    assert specs["a/0"].argv[:3] == ("/opt/venv/bin/vllm", "serve", "/m/a")  # the node's vLLM
    assert specs["b/0"].argv[:5] == ("python3", "-m", "vllm.entrypoints.cli.main", "serve", "/m/b")  # the model's
    assert specs["g/0"].argv[:2] == ("vllm", "serve")  # defaults.vllm_command
    assert specs["a/0"].argv[-2:] == ("--reasoning-parser", "qwen3")
    assert "VLLM_CPU_KVCACHE_SPACE" not in specs["a/0"].env  # never set behind the user's back


CASES: list[tuple[str, str, list[str]]] = [
    ("more cores than the node declares",
     "  a: {model: m, node: cpu, replicas: 3, gpus_per_replica: 0, cpus_per_replica: 2, port: 9000}\n",
     ["t.yaml:7: models.a.replicas: 3 CPU replicas x 2 cores need cores up to 5, but node 'cpu' declares cpus: 4"]),
    ("an unknown reasoning parser",
     "  a: {model: m, node: cpu, gpus_per_replica: 0, port: 9000, reasoning_parser: qwen4}\n",
     ["t.yaml:7: models.a.reasoning_parser: 'qwen4' is not a vLLM reasoning parser; did you mean 'qwen3'?"]),
    ("minimax is no longer a vLLM tool parser",
     "  a: {model: m, node: cpu, gpus_per_replica: 0, port: 9000, tool_parser: minimax}\n",
     ["t.yaml:7: models.a.tool_parser: 'minimax' is not a vLLM tool-call parser; did you mean 'minimax_m3'?"]),
    ("vLLM settings on a sim",
     "  a: {model: m, engine: sim, node: cpu, gpus_per_replica: 0, port: 9000, vllm_command: [v]}\n",
     ["t.yaml:7: models.a.vllm_command: applies only to engine: vllm"]),
    ("cores for a GPU replica",
     "  a: {model: m, node: gpu, port: 9000, cpus_per_replica: 2}\n",
     ["t.yaml:7: models.a.cpus_per_replica: applies only to the CPU build of vLLM (gpus_per_replica: 0)"]),
    ("the core binding is ours",
     "  a: {model: m, node: cpu, gpus_per_replica: 0, port: 9000, env: {VLLM_CPU_OMP_THREADS_BIND: '0-1'}}\n",
     ["t.yaml:7: models.a.env.VLLM_CPU_OMP_THREADS_BIND: set by orchestra-ops; use cpus_per_replica (each CPU "
      "replica gets its own cores)"]),
    ("the reasoning parser flag is a field",
     "  a: {model: m, node: cpu, gpus_per_replica: 0, port: 9000, engine_args: [--reasoning-parser, qwen3]}\n",
     ["t.yaml:7: models.a.engine_args.0: '--reasoning-parser' is set from the topology; use reasoning_parser "
      "instead"]),
]


@pytest.mark.parametrize(("models", "expected"), [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_invalid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, models: str, expected: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    Path("t.yaml").write_text(CPU_NODE + "models:\n" + models)
    with pytest.raises(TopologyError) as info:
        load_topology("t.yaml")
    assert info.value.problems == expected
