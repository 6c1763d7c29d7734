"""LoRA adapter directories for tests: PEFT's files (adapter_config.json + a safetensors file)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

TENSOR = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"


def safetensors_bytes(names: tuple[str, ...] = (TENSOR,)) -> bytes:
    """A minimal valid safetensors file: one float32 per tensor."""
    header = {name: {"dtype": "F32", "shape": [1, 1], "data_offsets": [4 * i, 4 * i + 4]}
              for i, name in enumerate(names)}
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + b"\0" * (4 * len(names))


def make_adapter(path: Path, *, r: int = 8, weights: str | None = "adapter_model.safetensors",
                 config: dict[str, Any] | None = None, drop: tuple[str, ...] = ()) -> Path:
    """An adapter dir with rank `r`; `config` adds or overrides keys, `drop` removes them."""
    path.mkdir(parents=True, exist_ok=True)
    body: dict[str, Any] = {"peft_type": "LORA", "r": r, "lora_alpha": 2 * r, "lora_dropout": 0.05,
                            "target_modules": ["q_proj", "v_proj"], "bias": "none",
                            "base_model_name_or_path": "Qwen/Qwen3-8B", "task_type": "CAUSAL_LM",
                            **(config or {})}
    for key in drop:
        body.pop(key, None)
    (path / "adapter_config.json").write_text(json.dumps(body, indent=2))
    if weights == "adapter_model.safetensors":
        (path / weights).write_bytes(safetensors_bytes())
    elif weights:
        (path / weights).write_bytes(b"torch pickle stand-in")
    return path
