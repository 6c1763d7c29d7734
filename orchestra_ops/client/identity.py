"""What a served name stands for: the part of a response-cache key that the request body does not hold.

A request names a model by its served name (`ft`, `sim/base`); the same name can stand for another
checkpoint tomorrow (`ops lora load ft ckpt-400` after `ft` was ckpt-200, a model dir replaced under
the same `served_model_name`). The cache key (cache.py) therefore holds, next to the body, the
identity of the target, worked out once per run (`resolve_identities`, before the first request):

    provider   {"provider": base_url, "model": its model}
    model      {"served": name, "revision": engine_args' --revision (topology),
                "declared": PATH|None, "roots": [PATH…]}
               declared: the directory the topology (a base model's `model`, `lora_modules`) or
               lora.json (`ops lora load`) names for it (None with an endpoints file: it names none);
               roots: each distinct `root` the replicas' /v1/models report for the name (an adapter's
               directory, a base model's path or hub id; vLLM's view of what it serves).
               PATH = {"path": P, "fingerprint": F|None}.

P is made absolute when it is a directory here (a relative one is taken from where the fleet was
started), and then F is `directory_fingerprint(P)`: a sha256 over every file at its top level, the
small JSON files (adapter_config.json, config.json, tokenizer files) by their whole bytes and the
others (the weights) by size, mtime and a hash of their first and last 64 KiB. A directory on
another node that is not visible here keys on its path alone. A replaced file, a changed
lora_alpha or a new checkpoint dir changes the key; a rerun on the same files hits.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import httpx

from orchestra_ops.client.routing import Routing, Target
from orchestra_ops.errors import ConfigError

log = logging.getLogger(__name__)

EDGE_BYTES = 64 * 1024  # how much of each end of a weights file is hashed
WHOLE_JSON_BYTES = 1024 * 1024  # JSON files up to this size are hashed whole
ROOTS_TIMEOUT_S = 5.0

Identity = dict[str, Any]


def directory_fingerprint(path: Path) -> str:
    """sha256 over the directory's top-level files (see the module doc); raises OSError when unreadable."""
    digest = hashlib.sha256()
    for entry in sorted(os.scandir(path), key=lambda e: e.name):
        if not entry.is_file():
            continue
        stat = entry.stat()
        digest.update(f"{entry.name}\0{stat.st_size}\0".encode())
        with open(entry.path, "rb") as handle:
            if entry.name.endswith(".json") and stat.st_size <= WHOLE_JSON_BYTES:
                digest.update(handle.read())
                continue
            digest.update(f"{stat.st_mtime_ns}\0".encode())
            digest.update(handle.read(EDGE_BYTES))
            if stat.st_size > 2 * EDGE_BYTES:
                handle.seek(stat.st_size - EDGE_BYTES)
                digest.update(handle.read(EDGE_BYTES))
    return digest.hexdigest()


def path_identity(path: str, workdir: str | None) -> dict[str, Any]:
    """{"path", "fingerprint"} of one directory a name is served from (fingerprint None: not a dir here)."""
    candidate = Path(path).expanduser()
    if not candidate.is_absolute():
        candidate = Path(workdir or os.getcwd()) / candidate
    if not candidate.is_dir():
        return {"path": path, "fingerprint": None}
    try:
        return {"path": str(candidate.resolve()), "fingerprint": directory_fingerprint(candidate)}
    except OSError as exc:
        raise ConfigError(f"{candidate}: cannot read it to key the response cache on it: {exc}") from None


def static_identity(target: Target, workdir: str | None = None, roots: Iterable[str] = (), *,
                    declared: bool = True) -> Identity:
    """A target's identity from what is declared (`declared`: a topology names its model or adapter
    directory; an endpoints file only its name) and the `roots` its replicas reported."""
    if target.kind == "provider":
        return {"provider": target.base_url, "model": target.served_name}
    path = target.adapter_path if target.adapter_of else target.checkpoint
    return {"served": target.served_name, "revision": target.revision,
            "declared": path_identity(path, workdir) if declared and path else None,
            "roots": [path_identity(root, workdir) for root in sorted(set(roots))]}


def identity_digest(identity: Mapping[str, Any]) -> str:
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def resolve_identities(routing: Routing, names: Iterable[str], *,
                       timeout_s: float = ROOTS_TIMEOUT_S) -> dict[str, Identity]:
    """target name -> identity, for every chat target `names` resolve to (asks each replica once)."""
    targets: dict[str, Target] = {}
    for name in names:
        target = routing.resolve(name)[1]
        if target.kind != "service":
            targets[target.name] = target
    asked = [t for t in targets.values() if t.kind == "model" and t.addresses]
    roots = asyncio.run(_roots_of(asked, timeout_s)) if asked else {}
    out = {}
    for key, target in targets.items():
        found = roots.get(key, [])
        if len(set(found)) > 1:
            log.warning("'%s' is served from %d directories (%s): the replicas differ", target.served_name,
                        len(set(found)), ", ".join(sorted(set(found))))
        out[key] = static_identity(target, routing.workdir, found, declared=routing.declared)
    return out


async def _roots_of(targets: list[Target], timeout_s: float) -> dict[str, list[str]]:
    async with httpx.AsyncClient(timeout=timeout_s, trust_env=False) as client:
        answers = await asyncio.gather(*(_root(client, host, port, t.served_name)
                                         for t in targets for host, port in t.addresses))
    out: dict[str, list[str]] = {}
    index = 0
    for target in targets:
        for _ in target.addresses:
            root = answers[index]
            index += 1
            if root is not None:
                out.setdefault(target.name, []).append(root)
    return out


async def _root(client: httpx.AsyncClient, host: str, port: int, served_name: str) -> str | None:
    """The `root` of `served_name`'s card in one replica's /v1/models (None: no answer, or not listed)."""
    try:
        response = await client.get(f"http://{host}:{port}/v1/models")
        cards = response.json().get("data") if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    for card in cards if isinstance(cards, list) else []:
        if isinstance(card, dict) and card.get("id") == served_name and isinstance(card.get("root"), str):
            return str(card["root"])
    return None
