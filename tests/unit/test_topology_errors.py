"""Invalid topologies: each one gives exactly the expected `FILE:LINE: path: message` lines."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from orchestra_ops.config.loader import load_topology
from orchestra_ops.config.model_spec import ModelSpec
from orchestra_ops.config.topology import Topology
from orchestra_ops.errors import TopologyError

HEADER = """\
name: t
backend: local
nodes:
  n: {host: localhost, gpus: 4}
  far: {host: gpu-box, gpus: 2}
"""

CASES: list[tuple[str, str, list[str]]] = [
    (
        "unknown key lists the valid ones",
        HEADER + """\
models:
  a: {model: m, node: n, port: 9000, flavour: 2}
""",
        [f"t.yaml:7: models.a.flavour: unknown key 'flavour'; valid keys: {', '.join(ModelSpec.model_fields)}"],
    ),
    (
        "a mistyped key: did you mean",
        HEADER + """\
models:
  a: {model: m, node: n, port: 9000, replica: 2}
""",
        ["t.yaml:7: models.a.replica: unknown key 'replica'; did you mean `replicas`?"],
    ),
    (
        "a mistyped top-level key: did you mean",
        HEADER + "modles: {}\n",
        ["t.yaml:6: modles: unknown key 'modles'; did you mean `models`?"],
    ),
    (
        "unknown top-level key",
        HEADER + "machines: {}\n",
        [f"t.yaml:6: machines: unknown key 'machines'; valid keys: {', '.join(Topology.model_fields)}"],
    ),
    (
        "a role naming a mistyped model: did you mean",
        HEADER + """\
models:
  answer: {model: m, node: n, port: 9000}
roles:
  judge: answr
""",
        ["t.yaml:9: roles.judge: 'answr' names no model, service or provider; did you mean `answer`? (answer)"],
    ),
    (
        "missing required field",
        HEADER + """\
models:
  a:
    model: m
    node: n
""",
        ["t.yaml:7: models.a.port: required"],
    ),
    (
        "port out of range",
        HEADER + """\
models:
  a: {model: m, node: n, port: 70000}
""",
        ["t.yaml:7: models.a.port: port 70000 is outside 1-65535"],
    ),
    (
        "replica ports run past 65535",
        HEADER + """\
models:
  a: {model: m, node: n, port: 65534, replicas: 3}
""",
        ["t.yaml:7: models.a.port: ports 65534..65536 for 3 replicas go past 65535"],
    ),
    (
        "duplicate host:port across models and services",
        HEADER + """\
models:
  a: {model: m, node: n, port: 9000, replicas: 2}
services:
  r: {kind: retrieval, node: n, port: 9001, index_dir: /idx}
""",
        ["t.yaml:9: services.r.port: port 9001 on host localhost is also used by models.a"],
    ),
    (
        "the same port on two different hosts is fine, on one host twice is not",
        HEADER + """\
models:
  a: {model: m, node: n, port: 9000}
  b: {model: m2, node: far, port: 9000}
  c: {model: m3, node: n, port: 9000}
""",
        ["t.yaml:9: models.c.port: port 9000 on host localhost is also used by models.a"],
    ),
    (
        "GPU index out of range",
        HEADER + """\
models:
  a: {model: m, node: far, port: 9000, gpus: [2]}
""",
        ["t.yaml:7: models.a.gpus: GPU 2 is out of range: node 'far' has 2 GPUs (0..1)"],
    ),
    (
        "GPU shared by two processes",
        HEADER + """\
models:
  a: {model: m, node: far, port: 9000, gpus: [0]}
  b: {model: m2, node: far, port: 9100, gpus: [0]}
""",
        ["t.yaml:8: models.b.gpus: GPU 0 of node 'far' is shared by a/0 and b/0; give each its own GPU, "
         "or set gpu_memory_utilization on every sharer"],
    ),
    (
        "shared GPU whose memory shares sum over 1.0",
        HEADER + """\
models:
  a: {model: m, node: far, port: 9000, gpus: [1], gpu_memory_utilization: 0.6}
  b: {model: m2, node: far, port: 9100, gpus: [1], gpu_memory_utilization: 0.5}
""",
        ["t.yaml:8: models.b.gpus: GPU 1 of node 'far' is shared by a/0 and b/0 whose "
         "gpu_memory_utilization sums to 1.10 (over 1.0)"],
    ),
    (
        "replicas x gpus_per_replica exceed the node",
        HEADER + """\
models:
  a: {model: m, node: n, port: 9000, replicas: 3, gpus_per_replica: 2}
""",
        ["t.yaml:7: models.a.replicas: 3 replicas × 2 GPUs = 6 GPUs do not fit node 'n' (4 GPUs, 4 free)"],
    ),
    (
        "a service GPU out of range",
        HEADER + """\
services:
  r: {kind: retrieval, node: far, gpu: 5, port: 8765, index_dir: /idx}
""",
        ["t.yaml:7: services.r.gpu: GPU 5 is out of range: node 'far' has 2 GPUs (0..1)"],
    ),
    (
        "gpt-oss with the hermes parser",
        HEADER + """\
models:
  search:
    model: openai/gpt-oss-20b
    node: n
    port: 1840
    tool_parser: hermes
""",
        ["t.yaml:11: models.search.tool_parser: 'hermes' cannot parse gpt-oss tool calls; use 'openai'"],
    ),
    (
        "a parser vLLM does not know",
        HEADER + """\
models:
  a: {model: /ckpt/x, node: n, port: 9000, tool_parser: herms}
""",
        ["t.yaml:7: models.a.tool_parser: 'herms' is not a vLLM tool-call parser; did you mean 'hermes'?"],
    ),
    (
        "a role naming nothing",
        HEADER + """\
models:
  a: {model: m, node: n, port: 9000}
roles:
  judge: gpt5
""",
        ["t.yaml:9: roles.judge: 'gpt5' names no model, service or provider (a)"],
    ),
    (
        "a model on an undeclared node",
        HEADER + """\
models:
  a: {model: m, node: node9, port: 9000}
""",
        ["t.yaml:7: models.a.node: 'node9' is not a declared node (nodes: n, far)"],
    ),
    (
        "a key written into the topology",
        HEADER + """\
providers:
  judge: {model: gpt-5, base_url: "https://x", api_key: sk-secret}
""",
        ["t.yaml:7: providers.judge.api_key: never put a key in the topology; "
         "name its environment variable with api_key_env"],
    ),
    (
        "engine args that repeat a managed flag",
        HEADER + """\
models:
  a:
    model: m
    node: n
    port: 9000
    engine_args: ["--dtype", "bfloat16", "--port=9100"]
""",
        ["t.yaml:11: models.a.engine_args.2: '--port' is set from the topology; use port instead"],
    ),
    (
        "CUDA_VISIBLE_DEVICES set by hand",
        HEADER + """\
models:
  a:
    model: m
    node: n
    port: 9000
    env: {CUDA_VISIBLE_DEVICES: "3"}
""",
        ["t.yaml:11: models.a.env.CUDA_VISIBLE_DEVICES: set by orchestra-ops; "
         "use gpus (placement sets it per replica)"],
    ),
    (
        "a secret in a process env",
        HEADER + """\
models:
  a:
    model: m
    node: n
    port: 9000
    env: {HF_TOKEN: hf_abc, VLLM_ATTENTION_BACKEND: FLASHINFER}
""",
        ["t.yaml:11: models.a.env.HF_TOKEN: never put a secret in the topology; "
         "export it in the shell that runs `ops up` (processes inherit it)"],
    ),
    (
        "vLLM without GPUs on a GPU node",
        HEADER + """\
models:
  a: {model: m, node: n, port: 9000, gpus_per_replica: 0}
""",
        ["t.yaml:7: models.a.gpus_per_replica: 0 GPUs per replica on node 'n', which has 4 GPUs: give each replica "
         "a GPU, or run the CPU build of vLLM on a node with gpus: 0 (or engine: sim)"],
    ),
    (
        "a node with a host under backend: slurm",
        HEADER.replace("backend: local", "backend: slurm"),
        [f"t.yaml:{line}: nodes.{name}.host: with backend: slurm every node is a slurm node; give this one "
         "'slurm:' settings, or set backend: local or tmux (nodes with a host on other machines are reached "
         "over ssh)" for line, name in ((4, "n"), (5, "far"))],
    ),
    (
        "duplicate YAML key",
        HEADER + """\
models:
  a: {model: m, node: n, port: 9000}
  a: {model: m, node: n, port: 9100}
""",
        ["t.yaml:8: models.a: duplicate key 'a' (first at line 7)"],
    ),
    (
        "invalid YAML",
        HEADER + "models: [a, b\n",
        ["t.yaml:7: invalid YAML: expected ',' or ']', but got '<stream end>'"],
    ),
    (
        "pricing: a negative price, a missing one, an unknown key, each located",
        HEADER + """\
models:
  a:
    model: m
    node: n
    port: 9000
    pricing: {input_per_mtok: -1, output_per_mtok: 2}
providers:
  judge:
    model: gpt-x
    base_url: https://api.example/v1
    pricing:
      input_per_mtok: 1.5
      per_token: 3
""",
        ["t.yaml:11: models.a.pricing.input_per_mtok: Input should be greater than or equal to 0 (got -1)",
         "t.yaml:16: providers.judge.pricing.output_per_mtok: required",
         "t.yaml:18: providers.judge.pricing.per_token: unknown key 'per_token'; valid keys: input_per_mtok, "
         "output_per_mtok"],
    ),
    (
        "several problems at once, in line order",
        HEADER + """\
models:
  a: {model: openai/gpt-oss-120b, node: n, port: 9000, tool_parser: hermes}
roles:
  search: b
""",
        ["t.yaml:7: models.a.tool_parser: 'hermes' cannot parse gpt-oss tool calls; use 'openai'",
         "t.yaml:9: roles.search: 'b' names no model, service or provider (a)"],
    ),
]


@pytest.mark.parametrize(("text", "expected"), [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_topology_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str,
                                  expected: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    Path("t.yaml").write_text(textwrap.dedent(text))
    with pytest.raises(TopologyError) as info:
        load_topology("t.yaml")
    assert info.value.problems == expected


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TopologyError) as info:
        load_topology(tmp_path / "nope.yaml")
    assert info.value.problems == [f"{tmp_path / 'nope.yaml'}: no such file"]


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(TopologyError) as info:
        load_topology(path)
    assert info.value.problems == [f"{path}:1: the top level must be a mapping (name:, nodes:, models: …)"]


def test_bundled_topologies_are_valid() -> None:
    root = Path(__file__).resolve().parents[2] / "topologies"
    names = sorted(p.name for p in root.glob("*.yaml"))
    assert {"hle_oss.yaml", "local.yaml", "slurm_example.yaml"} <= set(names)
    for name in names:
        assert load_topology(root / name).name
