"""Adapter directories read as vLLM reads them: every reason it would refuse one, in plain words."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestra_ops.config.adapter_dir import inspect_adapter, smallest_rank_for
from tests.adapters import make_adapter


def messages(path: Path, max_rank: int = 16) -> list[str]:
    return [p.message for p in inspect_adapter(path, max_rank).problems]


def test_a_plain_lora_is_servable(tmp_path: Path) -> None:
    info = inspect_adapter(make_adapter(tmp_path / "ft", r=16), 16)
    assert info.ok and (info.rank, info.alpha, info.weights) == (16, 32, "adapter_model.safetensors")
    assert info.base_model == "Qwen/Qwen3-8B"
    bin_only = make_adapter(tmp_path / "bin", weights="adapter_model.bin")
    assert inspect_adapter(bin_only).weights == "adapter_model.bin" and inspect_adapter(bin_only).ok


def test_missing_directory_and_a_file_instead_of_one(tmp_path: Path) -> None:
    missing = inspect_adapter(tmp_path / "nope")
    assert [(p.kind, p.message) for p in missing.problems] == [
        ("missing", f"no such adapter directory: {tmp_path / 'nope'}")]
    (tmp_path / "file").write_text("x")
    assert messages(tmp_path / "file") == [
        f"{tmp_path / 'file'} is a file; an adapter is a directory holding adapter_config.json and "
        "adapter_model.safetensors (PEFT's save_pretrained output)"]


def test_missing_config_and_weights(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert messages(empty) == [
        f"{empty}/adapter_config.json: missing (vLLM reads r, lora_alpha and target_modules from it)",
        f"{empty}: no weights file (adapter_model.safetensors, adapter_model.bin, adapter_model.pt); vLLM would "
        "say the directory doesn't contain tensors"]


def test_config_that_is_not_json_names_the_line(tmp_path: Path) -> None:
    path = make_adapter(tmp_path / "ft")
    (path / "adapter_config.json").write_text('{\n  "r": 8,\n  "lora_alpha": 16,,\n}')
    assert messages(path) == [f"{path}/adapter_config.json:3: not valid JSON: Expecting property name enclosed in "
                              "double quotes"]


def test_required_keys(tmp_path: Path) -> None:
    path = make_adapter(tmp_path / "ft", drop=("lora_alpha", "target_modules"))
    assert messages(path) == [f"{path}/adapter_config.json: no 'lora_alpha', 'target_modules' (vLLM needs r, "
                              "lora_alpha and target_modules)"]
    assert messages(make_adapter(tmp_path / "zero", r=0)) == ["r is 0; vLLM needs a positive integer rank"]


@pytest.mark.parametrize(("rank", "max_rank", "expected"), [
    (32, 16, "rank 32 is above max_lora_rank 16; set max_lora_rank: 32"),
    (48, 16, "rank 48 is above max_lora_rank 16; set max_lora_rank: 64"),
    (1024, 512, "rank 1024 is above max_lora_rank 512; vLLM serves ranks up to 512; merge the adapter into the "
                "base model and serve the merged checkpoint instead"),
])
def test_rank_above_max_lora_rank(tmp_path: Path, rank: int, max_rank: int, expected: str) -> None:
    assert messages(make_adapter(tmp_path / "ft", r=rank), max_rank) == [expected]
    assert inspect_adapter(make_adapter(tmp_path / "ok", r=rank), 512 if rank <= 512 else 1024).ok


def test_rank_pattern_counts(tmp_path: Path) -> None:
    path = make_adapter(tmp_path / "ft", r=8, config={"rank_pattern": {"v_proj": 64}})
    assert messages(path) == ["rank 64 (rank_pattern['v_proj']) is above max_lora_rank 16; set max_lora_rank: 64"]
    assert smallest_rank_for(17) == 32 and smallest_rank_for(300) == 320 and smallest_rank_for(513) is None


@pytest.mark.parametrize(("config", "expected"), [
    ({"use_dora": True}, "uses DoRA (use_dora: true), which vLLM cannot serve; merge the adapter into the base model "
                         "and serve the merged checkpoint instead"),
    ({"modules_to_save": ["embed_tokens", "lm_head"]},
     "saves whole modules (modules_to_save: ['embed_tokens', 'lm_head']), which vLLM cannot serve; merge the adapter "
     "into the base model and serve the merged checkpoint instead, or train without modules_to_save"),
    ({"bias": "all"}, "trains biases (bias: 'all'), which vLLM cannot serve; merge the adapter into the base model and "
                      "serve the merged checkpoint instead"),
    ({"init_lora_weights": "pissa_niter_16"},
     "was initialised with 'pissa_niter_16' (init_lora_weights), which vLLM cannot serve; convert it to a plain LoRA "
     "(PEFT's path_initial_model_for_weight_conversion) or merge the adapter into the base model and serve the "
     "merged checkpoint instead"),
])
def test_peft_features_vllm_refuses(tmp_path: Path, config: dict, expected: str) -> None:
    assert messages(make_adapter(tmp_path / "ft", config=config)) == [expected]


def test_what_vllm_accepts_is_not_flagged(tmp_path: Path) -> None:
    path = make_adapter(tmp_path / "ft", config={"modules_to_save": ["score"], "use_dora": False,
                                                 "init_lora_weights": "gaussian", "use_rslora": True})
    assert messages(path) == []


def test_a_truncated_safetensors_file(tmp_path: Path) -> None:
    path = make_adapter(tmp_path / "ft")
    data = (path / "adapter_model.safetensors").read_bytes()
    (path / "adapter_model.safetensors").write_bytes(data[:20])
    assert messages(path) == [f"{path}/adapter_model.safetensors: the header says {len(data) - 12} bytes but the file "
                              "has 20; a partial copy?"]
    (path / "adapter_model.safetensors").write_bytes(b"abc")
    assert messages(path) == [f"{path}/adapter_model.safetensors: 3 bytes, too short for a safetensors file "
                              "(a partial copy?)"]
