"""The vLLM flags and environment of a model that serves LoRA adapters (pure; used by plan.py).

    --enable-lora [--max-lora-rank R] [--max-loras N] [--lora-modules ITEM …]

Each `--lora-modules` item is vLLM's JSON form `{"name", "path", "base_model_name"}`: a path with
a comma or `=` in it stays one item, and `/v1/models` lists the adapter with its base model as
`parent`. `runtime_lora: true` adds VLLM_ALLOW_RUNTIME_LORA_UPDATING=True, without which vLLM does
not register `/v1/load_lora_adapter` and `/v1/unload_lora_adapter`. The simulated engine takes the
same flags (`--lora-modules` once per item) and reads the same variable.
"""

from __future__ import annotations

import json

from orchestra_ops.config.lora_checks import RUNTIME_ENV
from orchestra_ops.config.model_spec import ModelSpec


def lora_module_item(name: str, path: str, base_model_name: str) -> str:
    """One `--lora-modules` item in vLLM's JSON form."""
    return json.dumps({"name": name, "path": path, "base_model_name": base_model_name}, separators=(",", ":"))


def lora_argv(model: ModelSpec, *, repeat_modules_flag: bool = False) -> list[str]:
    """The LoRA flags of a model ([] when it serves no adapters).

    vLLM takes `--lora-modules A B …` (given twice, the second replaces the first); the simulated
    engine takes `--lora-modules A --lora-modules B` (`repeat_modules_flag`).
    """
    if not model.lora_enabled:
        return []
    argv = ["--enable-lora"]
    if model.max_lora_rank is not None:
        argv += ["--max-lora-rank", str(model.max_lora_rank)]
    if model.max_loras is not None:
        argv += ["--max-loras", str(model.max_loras)]
    items = [lora_module_item(name, path, model.served_name) for name, path in model.lora_modules.items()]
    if items and repeat_modules_flag:
        for item in items:
            argv += ["--lora-modules", item]
    elif items:
        argv += ["--lora-modules", *items]
    return argv


def lora_env(model: ModelSpec) -> dict[str, str]:
    """VLLM_ALLOW_RUNTIME_LORA_UPDATING=True when the model takes runtime loads."""
    return {RUNTIME_ENV: "True"} if model.runtime_lora else {}
