"""LoRA adapters in the simulated engine, served the way vLLM serves them.

Rules (tests import these to know what the sim does):

* ``--enable-lora --lora-modules ITEM …``: ITEM is vLLM's ``NAME=PATH`` or JSON ``{"name", "path",
  "base_model_name"}``. Static adapters load at startup through the same checks as the load
  endpoint; one that fails aborts startup (a ConfigError), as vLLM's ``init_static_loras`` does.
* An adapter directory is checked with ``orchestra_ops.config.adapter_dir.inspect_adapter`` against
  ``--max-lora-rank`` (default 16); ``--max-loras`` is accepted and has no effect.
* Runtime endpoints exist only when ``VLLM_ALLOW_RUNTIME_LORA_UPDATING`` is ``1`` or ``true`` (any
  case); otherwise they are not routes at all (404), as in vLLM.

  ``POST /v1/load_lora_adapter {"lora_name", "lora_path", "load_inplace"?}``
    200 text ``Success: LoRA adapter 'N' added successfully.``
    400 a validation error (type "Bad Request", param ``body.lora_name``/``body.lora_path``) when a
    field is missing
    400 ``The lora adapter 'N' has already been loaded. If you want to load the adapter in place, set
    'load_inplace' to True.`` (unless load_inplace)
    400 ``The lora adapter name 'N' is the name of a base model.``
    404 ``Loading lora N failed: No adapter found for PATH`` (NotFoundError)
    500 anything else about the directory, e.g. ``LoRA rank 16 is greater than max_lora_rank 8.``
  ``POST /v1/unload_lora_adapter {"lora_name"}``
    200 text ``Success: LoRA adapter 'N' removed successfully.``; 404 ``The lora adapter 'N' cannot be
    found.``; 400 when no name is given.
* ``/v1/models`` lists the base model, then one card per adapter in load order: ``id`` = the name,
  ``root`` = the path as given, ``parent`` = ``base_model_name`` when it is the served name, else
  the served name, ``max_model_len`` null.
* A chat request whose ``model`` is an adapter is answered as that adapter: the benchmark rules
  (opencompass_rules.py) take the request's model as the persona, and an expert answer's token ``T``
  becomes ``answer_token(NAME + "\\n" + T)`` (``adapter_reply``). Any other name is vLLM's 404.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from orchestra_ops.services.simllm import replies, wire
from orchestra_ops.services.simllm.config import SimConfig

from orchestra_ops.config.adapter_dir import inspect_adapter
from orchestra_ops.errors import ConfigError

RUNTIME_ENV = "VLLM_ALLOW_RUNTIME_LORA_UPDATING"


def runtime_updates_allowed(environ: dict[str, str] | None = None) -> bool:
    """vLLM's reading of VLLM_ALLOW_RUNTIME_LORA_UPDATING: "1" or "true", any case."""
    value = (environ if environ is not None else os.environ).get(RUNTIME_ENV, "")
    return value.strip().lower() in ("1", "true")


def parse_lora_module(item: str) -> tuple[str, str, str | None]:
    """One `--lora-modules` item -> (name, path, base_model_name), as vLLM's LoRAParserAction reads it."""
    if "=" in item and "," not in item:
        name, _, path = item.partition("=")
        return name, path, None
    try:
        data = json.loads(item)
    except ValueError:
        raise ConfigError(f"--lora-modules: {item!r} is neither NAME=PATH nor a JSON object") from None
    if not isinstance(data, dict) or not {"name", "path"} <= set(data) or set(data) - {
            "name", "path", "base_model_name", "is_3d_lora_weight"}:
        raise ConfigError(f"--lora-modules: {item!r} needs the keys name and path (and optionally base_model_name)")
    base = data.get("base_model_name")
    return str(data["name"]), str(data["path"]), None if base is None else str(base)


@dataclass(frozen=True)
class Adapter:
    name: str
    path: str
    parent: str


class AdapterTable:
    """The adapters one simulated replica serves (static ones first, then runtime loads)."""

    def __init__(self, config: SimConfig) -> None:
        self.base = config.model
        self.max_lora_rank = config.max_lora_rank
        self.enabled = config.enable_lora
        self.runtime = config.runtime_lora
        self.adapters: dict[str, Adapter] = {}
        for item in config.lora_modules:
            name, path, base_name = parse_lora_module(item)
            status, message = self.load(name, path, base_name)
            if status != 200:
                raise ConfigError(f"--lora-modules: cannot load adapter '{name}': {message}")

    def resolve(self, requested: Any) -> str | None:
        """The served name or adapter a request's `model` means (None/empty: the base), else None."""
        if requested in (None, "", self.base):
            return self.base
        return requested if isinstance(requested, str) and requested in self.adapters else None

    def is_adapter(self, name: str) -> bool:
        return name in self.adapters

    def load(self, name: Any, path: Any, base_model_name: str | None = None,
             inplace: bool = False) -> tuple[int, str]:
        """(status, message) of loading an adapter, with vLLM's statuses (see the module doc)."""
        if not name or not path:
            return 400, "Both 'lora_name' and 'lora_path' must be provided."
        name, path = str(name), str(path)
        if name == self.base:
            return 400, f"The lora adapter name '{name}' is the name of a base model."
        if name in self.adapters and not inplace:
            return 400, (f"The lora adapter '{name}' has already been loaded. If you want to load the adapter "
                         "in place, set 'load_inplace' to True.")
        info = inspect_adapter(Path(path).expanduser(), self.max_lora_rank)
        if any(p.kind == "missing" for p in info.problems):
            return 404, f"Loading lora {name} failed: No adapter found for {path}"
        if info.problems:
            if info.rank is not None and info.rank > self.max_lora_rank:
                return 500, f"LoRA rank {info.rank} is greater than max_lora_rank {self.max_lora_rank}."
            return 500, f"Loading lora {name} failed: {info.problems[0].message}"
        parent = self.base  # vLLM: base_model_name when it is a served name, else the first served name
        self.adapters[name] = Adapter(name, path, parent)
        return 200, f"Success: LoRA adapter '{name}' added successfully."

    def unload(self, name: Any) -> tuple[int, str]:
        if not name:
            return 400, "either 'lora_name' and 'lora_int_id' needs to be provided."
        if self.adapters.pop(str(name), None) is None:
            return 404, f"The lora adapter '{name}' cannot be found."
        return 200, f"Success: LoRA adapter '{name}' removed successfully."

    def cards(self) -> list[dict[str, Any]]:
        created = int(time.time())
        return [wire.model_card(a.name, a.path, a.parent, None, created) for a in self.adapters.values()]


def adapter_reply(reply: replies.Reply, adapter: str) -> replies.Reply:
    """An adapter's expert answer: each answer token T in the text becomes answer_token(adapter + "\\n" + T)."""
    if reply.role != replies.EXPERT or not reply.content:
        return reply
    text = replies.TOKEN_RE.sub(lambda m: replies.answer_token(f"{adapter}\n{m.group(0)}"), reply.content)
    return replies.Reply(reply.role, text, reply.tool_calls, reply.judge)


_ERROR_TYPES = {400: "InvalidUserInput", 404: "NotFoundError", 500: "InternalServerError"}


def _answer(status: int, message: str) -> web.Response:
    """200: vLLM's plain-text success line; else its JSON error body."""
    if status == 200:
        return web.Response(text=message, content_type="text/plain")
    return wire.error_response(status, message, error_type=_ERROR_TYPES.get(status, "APIError"))


def _missing(body: dict[str, Any], fields: tuple[str, ...]) -> web.Response | None:
    """vLLM's validation 400 for a required field the body lacks."""
    for name in fields:
        if not body.get(name):
            return wire.error_response(400, f"1 validation error: '{name}' is required", param=f"body.{name}",
                                       error_type=wire.VALIDATION_ERROR)
    return None


async def _body(request: web.Request) -> dict[str, Any] | None:
    try:
        body = json.loads(await request.read())
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def add_routes(app: web.Application, table: AdapterTable) -> None:
    """The runtime load/unload endpoints, only when runtime updating is allowed (as vLLM registers them)."""
    if not table.runtime:
        return

    async def load(request: web.Request) -> web.Response:
        body = await _body(request)
        if body is None:
            return _answer(400, "request body must be a JSON object")
        missing = _missing(body, ("lora_name", "lora_path"))
        if missing is not None:
            return missing
        if not table.enabled:
            return _answer(400, "LoRA is not enabled. Please start the server with --enable-lora.")
        return _answer(*table.load(body.get("lora_name"), body.get("lora_path"),
                                   inplace=bool(body.get("load_inplace"))))

    async def unload(request: web.Request) -> web.Response:
        body = await _body(request)
        if body is None:
            return _answer(400, "request body must be a JSON object")
        missing = _missing(body, ("lora_name",))
        if missing is not None:
            return missing
        return _answer(*table.unload(body.get("lora_name")))

    app.router.add_post("/v1/load_lora_adapter", load)
    app.router.add_post("/v1/unload_lora_adapter", unload)
