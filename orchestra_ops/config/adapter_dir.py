"""What vLLM checks in a LoRA adapter directory before it serves it, checked here first.

vLLM (0.33) reads `adapter_config.json` (`r`, `lora_alpha` and `target_modules` required; PEFT's
other keys honoured or refused) and the first of `adapter_model.safetensors`, `.bin`, `.pt`.
It refuses DoRA, trained biases, `modules_to_save` (other than classifier/score heads),
PiSSA/OLoRA/LoftQ-style initialisations, layer replication, aLoRA, and a rank (`r`, or any
`rank_pattern` value) above `--max-lora-rank`. A static adapter that fails aborts the server's
startup; a runtime load answers 404 (no such directory) or an error status. `inspect_adapter`
says all of that up front, one problem per line, without importing torch.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

# The values vLLM accepts for --max-lora-rank, and its default.
VLLM_MAX_LORA_RANKS: tuple[int, ...] = (1, 8, 16, 32, 64, 128, 256, 320, 512)
DEFAULT_MAX_LORA_RANK = 16
CONFIG_FILE = "adapter_config.json"
WEIGHT_FILES: tuple[str, ...] = ("adapter_model.safetensors", "adapter_model.bin", "adapter_model.pt")
REQUIRED_KEYS: tuple[str, ...] = ("r", "lora_alpha", "target_modules")
SERVABLE_SAVED_MODULES = frozenset({"classifier", "score"})
UNSERVABLE_INITS: tuple[str, ...] = ("pissa", "olora", "loftq", "corda", "eva")
MERGE_HINT = "merge the adapter into the base model and serve the merged checkpoint instead"

ProblemKind = Literal["missing", "invalid"]


@dataclass(frozen=True)
class AdapterProblem:
    """One reason vLLM would not serve an adapter: `missing` (vLLM's 404) or `invalid`."""

    kind: ProblemKind
    message: str


@dataclass(frozen=True)
class AdapterInfo:
    """What an adapter directory holds (as far as it could be read)."""

    path: str
    rank: int | None = None
    alpha: float | None = None
    target_modules: Any = None
    weights: str | None = None  # the weights file vLLM would read
    base_model: str | None = None  # base_model_name_or_path (informative: vLLM does not check it)
    problems: list[AdapterProblem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def smallest_rank_for(rank: int) -> int | None:
    """The smallest --max-lora-rank vLLM accepts that fits `rank` (None: above every one)."""
    return next((value for value in VLLM_MAX_LORA_RANKS if value >= rank), None)


def inspect_adapter(path: str | Path, max_lora_rank: int = DEFAULT_MAX_LORA_RANK) -> AdapterInfo:
    """Read an adapter directory and list every reason vLLM would refuse it (empty: it would load)."""
    where = Path(path)
    if not where.exists():
        return AdapterInfo(str(path), problems=[AdapterProblem("missing", f"no such adapter directory: {path}")])
    if not where.is_dir():
        return AdapterInfo(str(path), problems=[AdapterProblem(
            "invalid", f"{path} is a file; an adapter is a directory holding {CONFIG_FILE} and "
            f"{WEIGHT_FILES[0]} (PEFT's save_pretrained output)")])
    problems: list[AdapterProblem] = []
    config = _read_config(where, problems)
    weights = _weights(where, problems)
    if config is None:
        return AdapterInfo(str(path), weights=weights, problems=problems)
    rank = _rank(config, max_lora_rank, problems)
    for message in _unservable_features(config):
        problems.append(AdapterProblem("invalid", message))
    alpha = config.get("lora_alpha")
    base = config.get("base_model_name_or_path")
    return AdapterInfo(str(path), rank=rank, alpha=alpha if isinstance(alpha, (int, float)) else None,
                       target_modules=config.get("target_modules"), weights=weights,
                       base_model=base if isinstance(base, str) else None, problems=problems)


def _read_config(where: Path, problems: list[AdapterProblem]) -> dict[str, Any] | None:
    config_path = where / CONFIG_FILE
    try:
        text = config_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        problems.append(AdapterProblem("invalid", f"{config_path}: missing (vLLM reads r, lora_alpha and "
                                                  "target_modules from it)"))
        return None
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(AdapterProblem("invalid", f"{config_path}: cannot read: {exc}"))
        return None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        problems.append(AdapterProblem("invalid", f"{config_path}:{exc.lineno}: not valid JSON: {exc.msg}"))
        return None
    if not isinstance(config, dict):
        problems.append(AdapterProblem("invalid", f"{config_path}: expected a JSON object"))
        return None
    missing = [key for key in REQUIRED_KEYS if key not in config]
    if missing:
        problems.append(AdapterProblem("invalid", f"{config_path}: no {', '.join(repr(k) for k in missing)} "
                                                  "(vLLM needs r, lora_alpha and target_modules)"))
    return config


def _rank(config: dict[str, Any], max_lora_rank: int, problems: list[AdapterProblem]) -> int | None:
    rank = config.get("r")
    if "r" in config and (isinstance(rank, bool) or not isinstance(rank, int) or rank <= 0):
        problems.append(AdapterProblem("invalid", f"r is {rank!r}; vLLM needs a positive integer rank"))
        return None
    if not isinstance(rank, int):
        return None
    pattern = config.get("rank_pattern")
    highest, source = rank, "r"
    if isinstance(pattern, dict):
        for module, value in pattern.items():
            if isinstance(value, int) and not isinstance(value, bool) and value > highest:
                highest, source = value, f"rank_pattern[{module!r}]"
    if highest > max_lora_rank:
        fit = smallest_rank_for(highest)
        hint = (f"set max_lora_rank: {fit}" if fit is not None
                else f"vLLM serves ranks up to {VLLM_MAX_LORA_RANKS[-1]}; {MERGE_HINT}")
        what = f"rank {highest}" if source == "r" else f"rank {highest} ({source})"
        problems.append(AdapterProblem("invalid", f"{what} is above max_lora_rank {max_lora_rank}; {hint}"))
    return rank


def _unservable_features(config: dict[str, Any]) -> list[str]:
    """PEFT features vLLM refuses to serve, each as a sentence saying what to do instead."""
    out: list[str] = []
    if config.get("use_dora"):
        out.append(f"uses DoRA (use_dora: true), which vLLM cannot serve; {MERGE_HINT}")
    saved = config.get("modules_to_save")
    if saved:
        names = saved if isinstance(saved, list) else [saved]
        unservable = [str(n) for n in names if str(n) not in SERVABLE_SAVED_MODULES]
        if unservable:
            out.append(f"saves whole modules (modules_to_save: {unservable}), which vLLM cannot serve; "
                       f"{MERGE_HINT}, or train without modules_to_save")
    bias = config.get("bias")
    if config.get("lora_bias") or (bias is not None and bias != "none"):
        shown = "lora_bias: true" if config.get("lora_bias") else f"bias: {bias!r}"
        out.append(f"trains biases ({shown}), which vLLM cannot serve; {MERGE_HINT}")
    init = config.get("init_lora_weights")
    if isinstance(init, str) and init.lower().startswith(UNSERVABLE_INITS):
        out.append(f"was initialised with {init!r} (init_lora_weights), which vLLM cannot serve; convert it to "
                   f"a plain LoRA (PEFT's path_initial_model_for_weight_conversion) or {MERGE_HINT}")
    if config.get("layer_replication"):
        out.append(f"uses layer_replication, which vLLM cannot serve; {MERGE_HINT}")
    if config.get("alora_invocation_tokens"):
        out.append("is an activated LoRA (alora_invocation_tokens), which vLLM cannot serve as a LoRA")
    return out


def _weights(where: Path, problems: list[AdapterProblem]) -> str | None:
    for name in WEIGHT_FILES:
        candidate = where / name
        if candidate.is_file():
            if name.endswith(".safetensors"):
                problem = _safetensors_problem(candidate)
                if problem:
                    problems.append(AdapterProblem("invalid", problem))
            return name
    problems.append(AdapterProblem("invalid", f"{where}: no weights file ({', '.join(WEIGHT_FILES)}); vLLM "
                                              "would say the directory doesn't contain tensors"))
    return None


def _safetensors_problem(path: Path) -> str | None:
    """A truncated or foreign .safetensors file (its 8-byte header length and JSON header must read)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            head = handle.read(8)
            if len(head) < 8:
                return f"{path}: {size} bytes, too short for a safetensors file (a partial copy?)"
            (length,) = struct.unpack("<Q", head)
            if length > size - 8 or length > 100_000_000:
                return f"{path}: the header says {length} bytes but the file has {size}; a partial copy?"
            header = json.loads(handle.read(length))
    except OSError as exc:
        return f"{path}: cannot read: {exc}"
    except (ValueError, UnicodeDecodeError):
        return f"{path}: not a safetensors file (its header is not JSON)"
    if not isinstance(header, dict) or not any(key != "__metadata__" for key in header):
        return f"{path}: holds no tensors"
    return None
