"""Topology checks of the LoRA fields (called from orchestra_ops/config/checks.py).

Each adapter is a served name of its own (the request's `model`, a key of the endpoints file, a
routing target), so its name must be one nobody else uses. Each declared adapter directory is read
as vLLM would read it (adapter_dir.py): a problem is `FILE:LINE: models.X.lora_modules.NAME: …` at
`ops plan`, not a server that dies at startup. A directory this machine cannot see is checked only
when the model runs here: on another host it may live on that host's own disk.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from orchestra_ops.config.adapter_dir import DEFAULT_MAX_LORA_RANK, VLLM_MAX_LORA_RANKS, inspect_adapter
from orchestra_ops.config.model_spec import ModelSpec
from orchestra_ops.config.topology import Topology

log = logging.getLogger(__name__)

Problem = tuple[tuple[Any, ...], str]
ADAPTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]*$")
RUNTIME_ENV = "VLLM_ALLOW_RUNTIME_LORA_UPDATING"
# vLLM flags the LoRA fields set; repeating them in engine_args is refused (below)
LORA_FLAGS: dict[str, str] = {
    "--enable-lora": "lora_modules or runtime_lora",
    "--lora-modules": "lora_modules",
    "--max-lora-rank": "max_lora_rank",
    "--max-loras": "max_loras",
}


def check_lora(topology: Topology) -> Iterator[Problem]:
    taken = names_in_use(topology)
    declared: dict[str, str] = {}
    for key, model in topology.models.items():
        yield from _fields(key, model)
        for name, path in model.lora_modules.items():
            where = ("models", key, "lora_modules", name)
            problem = name_problem(name, taken, declared.get(name))
            if problem:
                yield where, problem
            declared.setdefault(name, key)
            yield from ((where, message) for message in _directory(topology, model, path))


def names_in_use(topology: Topology) -> dict[str, str]:
    """Every name a request, an endpoints key or a role may already mean -> what it is."""
    taken: dict[str, str] = {}
    for role in topology.roles:
        taken[role] = f"the role '{role}'"
    for key in topology.providers:
        taken[key] = f"the provider '{key}'"
    for key in topology.services:
        taken[key] = f"the service '{key}'"
    for key, model in topology.models.items():
        taken[model.served_name] = f"the served name of models.{key}"
        taken[key] = f"the model '{key}'"
    return taken


def name_problem(name: str, taken: dict[str, str], declared_by: str | None = None) -> str | None:
    """Why `name` cannot name an adapter, or None."""
    if not ADAPTER_NAME.match(name):
        return (f"'{name}' is not an adapter name (letters, digits, '.', '_', ':', '/' or '-'; it becomes the "
                "request's model and a key of the endpoints file)")
    if name in taken:
        return f"'{name}' is already {taken[name]}; an adapter needs a name of its own"
    if declared_by is not None:
        return f"'{name}' is also an adapter of models.{declared_by}"
    return None


def _fields(key: str, model: ModelSpec) -> Iterator[Problem]:
    if not model.lora_enabled:
        for field in ("max_lora_rank", "max_loras"):
            if getattr(model, field) is not None:
                yield ("models", key, field), "applies only to a model with lora_modules or runtime_lora: true"
    if model.max_lora_rank is not None and model.max_lora_rank not in VLLM_MAX_LORA_RANKS:
        allowed = ", ".join(map(str, VLLM_MAX_LORA_RANKS))
        yield ("models", key, "max_lora_rank"), f"{model.max_lora_rank} is not a rank vLLM accepts ({allowed})"
    for index, arg in enumerate(model.engine_args):
        flag = arg.split("=", 1)[0]
        if flag in LORA_FLAGS:
            yield ("models", key, "engine_args", index), f"'{flag}' is set from the topology; use {LORA_FLAGS[flag]}"
    if RUNTIME_ENV in model.env:
        yield ("models", key, "env", RUNTIME_ENV), "set by orchestra-ops; use runtime_lora: true"
    if model.runtime_lora and _api_servers(model.engine_args) > 1:
        yield ("models", key, "runtime_lora"), ("vLLM refuses runtime LoRA loading with --api-server-count > 1 "
                                                "(each API server would hold its own adapters)")


def _api_servers(args: list[str]) -> int:
    for index, arg in enumerate(args):
        value = None
        if arg.startswith("--api-server-count="):
            value = arg.split("=", 1)[1]
        elif arg == "--api-server-count" and index + 1 < len(args):
            value = args[index + 1]
        if value is not None and value.isdigit():
            return int(value)
    return 1


def _directory(topology: Topology, model: ModelSpec, path: str) -> Iterator[str]:
    node = topology.nodes.get(model.node)
    if node is not None and not node.is_local and not Path(path).exists():
        log.warning("adapter %s is not on this machine; it is checked on node %s when vLLM starts", path, model.node)
        return
    rank = model.max_lora_rank or DEFAULT_MAX_LORA_RANK
    for problem in inspect_adapter(path, rank).problems:
        message = problem.message
        if problem.kind == "missing" and not Path(path).is_absolute():
            message += (f" (relative to {Path.cwd()}; vLLM would take a missing relative path for a Hugging Face "
                        "repo id: download the adapter and give its directory)")
        if model.max_lora_rank is None and "max_lora_rank" in message:
            message = message.replace(f"max_lora_rank {rank};", f"max_lora_rank {rank} (vLLM's default);")
        yield message
