"""LoRA in the topology: located errors at load time (`ops plan`), and the exact flags the plan gives vLLM."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from orchestra_ops.config.loader import load_topology
from orchestra_ops.errors import TopologyError
from orchestra_ops.fleet.endpoints import endpoints_for
from orchestra_ops.fleet.plan import plan
from tests.adapters import make_adapter
from tests.helpers import run_ops


def write(tmp_path: Path, models: str, roles: str = "") -> Path:
    path = tmp_path / "t.yaml"
    path.write_text(textwrap.dedent("""\
        name: t
        nodes:
          n: {host: localhost, gpus: 4}
          far: {host: gpu-box, gpus: 2}
        models:
        """) + textwrap.indent(textwrap.dedent(models), "  ") + textwrap.dedent(roles))
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(TopologyError) as caught:
        load_topology(path)
    return caught.value.problems


def test_bad_adapter_directories_are_located_errors(tmp_path: Path) -> None:
    good = make_adapter(tmp_path / "good", r=8)
    no_config = make_adapter(tmp_path / "no_config")
    (no_config / "adapter_config.json").unlink()
    big = make_adapter(tmp_path / "big", r=64)
    dora = make_adapter(tmp_path / "dora", config={"use_dora": True})
    saves = make_adapter(tmp_path / "saves", config={"modules_to_save": ["lm_head"]})
    no_weights = make_adapter(tmp_path / "no_weights", weights=None)
    path = write(tmp_path, f"""\
        base:
          model: Qwen/Qwen3-8B
          node: n
          port: 9000
          lora_modules:
            good: {good}
            no-config: {no_config}
            big: {big}
            dora: {dora}
            saves: {saves}
            no-weights: {no_weights}
            gone: {tmp_path / 'gone'}
        """)
    merge = "merge the adapter into the base model and serve the merged checkpoint instead"
    assert problems(path) == [
        f"{path}:12: models.base.lora_modules.no-config: {no_config}/adapter_config.json: missing (vLLM reads r, "
        "lora_alpha and target_modules from it)",
        f"{path}:13: models.base.lora_modules.big: rank 64 is above max_lora_rank 16 (vLLM's default); "
        "set max_lora_rank: 64",
        f"{path}:14: models.base.lora_modules.dora: uses DoRA (use_dora: true), which vLLM cannot serve; {merge}",
        f"{path}:15: models.base.lora_modules.saves: saves whole modules (modules_to_save: ['lm_head']), which vLLM "
        f"cannot serve; {merge}, or train without modules_to_save",
        f"{path}:16: models.base.lora_modules.no-weights: {no_weights}: no weights file (adapter_model.safetensors, "
        "adapter_model.bin, adapter_model.pt); vLLM would say the directory doesn't contain tensors",
        f"{path}:17: models.base.lora_modules.gone: no such adapter directory: {tmp_path / 'gone'}",
    ]


def test_ops_plan_exits_2_with_the_located_error_and_no_traceback(tmp_path: Path) -> None:
    big = make_adapter(tmp_path / "big", r=32)
    path = write(tmp_path, f"""\
        base: {{model: Qwen/Qwen3-8B, node: n, port: 9000, max_lora_rank: 16, lora_modules: {{ft: {big}}}}}
        """)
    proc = run_ops(["plan", str(path)])
    assert proc.returncode == 2
    assert proc.stderr == (f"{path}:6: models.base.lora_modules.ft: rank 32 is above max_lora_rank 16; "
                           "set max_lora_rank: 32\n")


def test_relative_adapter_paths_are_relative_to_where_ops_runs(tmp_path: Path) -> None:
    make_adapter(tmp_path / "out")
    path = write(tmp_path, """\
        base: {model: m, node: n, port: 9000, lora_modules: {ft: ./out, hub: org/some-lora}}
        """)
    proc = run_ops(["plan", str(path)], cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (f"{path}:6: models.base.lora_modules.hub: no such adapter directory: org/some-lora "
                           f"(relative to {tmp_path}; vLLM would take a missing relative path for a Hugging Face "
                           "repo id: download the adapter and give its directory)\n")


def test_names_fields_and_flags(tmp_path: Path) -> None:
    ad = make_adapter(tmp_path / "ad")
    path = write(tmp_path, f"""\
        base:
          model: Qwen/Qwen3-8B
          node: n
          port: 9000
          max_lora_rank: 24
          runtime_lora: true
          engine_args: ["--enable-lora", "--api-server-count", "2"]
          env: {{VLLM_ALLOW_RUNTIME_LORA_UPDATING: "1"}}
          lora_modules: {{judge: {ad}, other: {ad}, "bad name": {ad}, Qwen/Qwen3-8B: {ad}}}
        other: {{model: m2, node: n, port: 9100, max_loras: 2, lora_modules: {{shared: {ad}}}}}
        third: {{model: m3, node: n, port: 9200, max_lora_rank: 8}}
        fourth: {{model: m4, node: n, port: 9300, lora_modules: {{shared: {ad}}}}}
        """, roles="roles: {judge: base, candidate: shared}\n")
    assert problems(path) == [
        f"{path}:10: models.base.max_lora_rank: 24 is not a rank vLLM accepts (1, 8, 16, 32, 64, 128, 256, 320, 512)",
        f"{path}:11: models.base.runtime_lora: vLLM refuses runtime LoRA loading with --api-server-count > 1 (each "
        "API server would hold its own adapters)",
        f"{path}:12: models.base.engine_args.0: '--enable-lora' is set from the topology; use lora_modules or "
        "runtime_lora",
        f"{path}:13: models.base.env.VLLM_ALLOW_RUNTIME_LORA_UPDATING: set by orchestra-ops; use runtime_lora: true",
        f"{path}:14: models.base.lora_modules.Qwen/Qwen3-8B: 'Qwen/Qwen3-8B' is already the served name of "
        "models.base; an adapter needs a name of its own",
        f"{path}:14: models.base.lora_modules.bad name: 'bad name' is not an adapter name (letters, digits, '.', "
        "'_', ':', '/' or '-'; it becomes the request's model and a key of the endpoints file)",
        f"{path}:14: models.base.lora_modules.judge: 'judge' is already the role 'judge'; an adapter needs a name "
        "of its own",
        f"{path}:14: models.base.lora_modules.other: 'other' is already the model 'other'; an adapter needs a name "
        "of its own",
        f"{path}:16: models.third.max_lora_rank: applies only to a model with lora_modules or runtime_lora: true",
        f"{path}:17: models.fourth.lora_modules.shared: 'shared' is also an adapter of models.other",
    ]


def test_an_adapter_on_another_host_that_is_not_here_is_left_to_that_host(tmp_path: Path) -> None:
    path = write(tmp_path, """\
        base: {model: m, node: far, port: 9000, lora_modules: {ft: /data/adapters/ft}}
        """, roles="roles: {candidate: ft}\n")
    topology = load_topology(path)  # a role may name an adapter
    assert topology.roles == {"candidate": "ft"}


def test_golden_argv_env_and_endpoints(tmp_path: Path) -> None:
    ft, math = make_adapter(tmp_path / "ft,v2", r=16), make_adapter(tmp_path / "math=1", r=32)
    path = write(tmp_path, f"""\
        base:
          model: /ckpt/Qwen3-8B
          served_model_name: qwen3-8b
          node: n
          replicas: 2
          port: 9000
          gpu_memory_utilization: 0.85
          max_lora_rank: 32
          max_loras: 2
          runtime_lora: true
          lora_modules: {{ft: "{ft}", math: "{math}"}}
          engine_args: ["--max-cpu-loras", "4"]
        plain: {{model: m, node: n, port: 9100, gpus: [2], gpu_memory_utilization: 0.1}}
        runtime-only: {{model: r, node: far, port: 9200, runtime_lora: true}}
        sim:
          model: sim/base
          engine: sim
          node: n
          port: 9300
          gpus_per_replica: 0
          lora_modules: {{ft2: "{ft}"}}
        """)
    launch = plan(load_topology(path), state_dir="/state")
    item_ft = json.dumps({"name": "ft", "path": str(ft), "base_model_name": "qwen3-8b"}, separators=(",", ":"))
    item_math = json.dumps({"name": "math", "path": str(math), "base_model_name": "qwen3-8b"}, separators=(",", ":"))
    assert list(launch.by_name("base/1").argv) == [
        "vllm", "serve", "/ckpt/Qwen3-8B", "--host", "127.0.0.1", "--port", "9001", "--served-model-name", "qwen3-8b",
        "--gpu-memory-utilization", "0.85", "--enable-lora", "--max-lora-rank", "32", "--max-loras", "2",
        "--lora-modules", item_ft, item_math, "--max-cpu-loras", "4"]
    assert item_ft == '{"name":"ft","path":"' + str(ft) + '","base_model_name":"qwen3-8b"}'
    assert launch.by_name("base/1").env == {
        "CUDA_VISIBLE_DEVICES": "1", "PYTHONUNBUFFERED": "1",
        "VLLM_CACHE_ROOT": "/tmp/orchestra-ops/vllm-cache/t/base-1", "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}
    assert "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True" in launch.by_name("base/0").reproduce
    assert list(launch.by_name("plain/0").argv) == [
        "vllm", "serve", "m", "--host", "127.0.0.1", "--port", "9100", "--gpu-memory-utilization", "0.1"]
    assert "VLLM_ALLOW_RUNTIME_LORA_UPDATING" not in launch.by_name("plain/0").env
    assert list(launch.by_name("runtime-only/0").argv) == [
        "vllm", "serve", "r", "--host", "0.0.0.0", "--port", "9200", "--enable-lora"]
    sim_argv = list(launch.by_name("sim/0").argv)
    item_sim = json.dumps({"name": "ft2", "path": str(ft), "base_model_name": "sim/base"}, separators=(",", ":"))
    assert sim_argv[sim_argv.index("--enable-lora"):] == ["--enable-lora", "--lora-modules", item_sim, "--seed", "0"]
    endpoints = endpoints_for(launch)
    assert endpoints["ft"] == endpoints["math"] == endpoints["qwen3-8b"] == [
        {"ip_addr": "127.0.0.1", "port": 9000}, {"ip_addr": "127.0.0.1", "port": 9001}]
    assert endpoints["ft2"] == endpoints["sim/base"] == [{"ip_addr": "127.0.0.1", "port": 9300}]
    assert launch.by_name("base/0").to_json()["adapters"] == ["ft", "math"]
