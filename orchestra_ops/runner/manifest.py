"""The run manifest: what a run asked, of whom, with what, so two runs can be proven equivalent.

Written into the run dir's run.json under `"manifest"`, before the first request:

    suite, suite_options                 the suite and its options (e.g. max rounds)
    dataset: path, sha256, ids_sha256,   the file's sha256, and the sha256 of the ids the run covers
             count                       (after --limit / --dedupe; sorted, one JSON id per line)
    templates: {name: {path, sha256}}    every prompt template the suite uses
    judge: {target, model, settings}     the judge (None for suites without one)
    routing: [{role, target, kind, served_name, replicas, where}]
    topology: {name, source, sha256, endpoints_sha256}
    cli: {...}                           the eval command's options
    ops: {version, git_commit, git_dirty}

Secrets never go in: a provider is recorded by its URL and the *name* of its key variable, and
option values whose name says key/token/secret/password are replaced by "<redacted>".
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from orchestra_ops import __version__
from orchestra_ops.client.routing import Routing
from orchestra_ops.runner.results import TaskId

MANIFEST_KEY = "manifest"
MANIFEST_VERSION = 1
SECRET_WORDS = ("key", "token", "secret", "password", "credential")


def manifest_of(run_info: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The manifest inside a run.json (None for run dirs written before manifests existed)."""
    if not run_info:
        return None
    manifest = run_info.get(MANIFEST_KEY)
    return manifest if isinstance(manifest, dict) else None


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def ids_sha256(ids: Iterable[TaskId]) -> str:
    """Order-free fingerprint of an id list: sha256 of the sorted JSON texts of the ids, one per line."""
    return sha256_text("\n".join(sorted(json.dumps(i, ensure_ascii=False) for i in ids)))


def dataset_entry(path: str | Path, ids: list[TaskId]) -> dict[str, Any]:
    return {"path": str(path), "sha256": sha256_file(path), "ids_sha256": ids_sha256(ids), "count": len(ids)}


def template_entries(templates: Mapping[str, str | Path]) -> dict[str, dict[str, Any]]:
    """{name: path} -> {name: {path, sha256}}."""
    return {name: {"path": str(path), "sha256": sha256_file(path)} for name, path in sorted(templates.items())}


def routing_entries(routing: Routing, names: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Every role the routing declares, and every other name the run calls."""
    rows: list[dict[str, Any]] = []
    seen = set()
    for role, key in routing.roles.items():
        rows.append(_routing_row(role, routing, key))
        seen.add(role)
    for name in names:
        if name not in seen:
            _, target = routing.resolve(name)
            rows.append(_routing_row(name, routing, target.name))
    return rows


def _routing_row(role: str, routing: Routing, key: str) -> dict[str, Any]:
    target = routing.targets[key]
    row: dict[str, Any] = {"role": role, "target": key, "kind": target.kind, "served_name": target.served_name,
                           "replicas": len(target.addresses) if target.kind != "provider" else None,
                           "where": target.where}
    if target.request_defaults:
        row["request_defaults"] = redact(dict(target.request_defaults))
    return row


def topology_entry(routing: Routing) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": routing.name, "source": routing.source,
                             "sha256": _hash_if_file(routing.source),
                             "endpoints_file": routing.endpoints_file,
                             "endpoints_sha256": _hash_if_file(routing.endpoints_file)}
    return entry


def _hash_if_file(path: str) -> str | None:
    try:
        return sha256_file(path)
    except OSError:
        return None


def ops_entry() -> dict[str, Any]:
    return {"version": __version__, **git_info(Path(__file__).resolve().parent)}


def git_info(folder: Path) -> dict[str, Any]:
    """The commit of the ops source tree (and whether it has local changes), when it is a git checkout."""
    try:
        commit = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10, check=False)
        if commit.returncode != 0:
            return {"git_commit": None}
        dirty = subprocess.run(["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None}
    return {"git_commit": commit.stdout.strip(), "git_dirty": bool(dirty.stdout.strip()) if dirty.returncode == 0
            else None}


def redact(options: Mapping[str, Any]) -> dict[str, Any]:
    """A copy with the values of secret-looking keys replaced (recursively)."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        if any(word in str(key).lower() for word in SECRET_WORDS) and not str(key).lower().endswith("_env"):
            out[key] = "<redacted>" if value is not None else None
        elif isinstance(value, Mapping):
            out[key] = redact(value)
        else:
            out[key] = value
    return out


def build_manifest(*, suite: str, suite_options: Mapping[str, Any], dataset: str | Path, ids: list[TaskId],
                   templates: Mapping[str, str | Path], judge: Mapping[str, Any] | None, routing: Routing,
                   names: Iterable[str], cli: Mapping[str, Any]) -> dict[str, Any]:
    return {"manifest_version": MANIFEST_VERSION, "suite": suite, "suite_options": redact(suite_options),
            "dataset": dataset_entry(dataset, ids), "templates": template_entries(templates),
            "judge": redact(judge) if judge is not None else None, "routing": routing_entries(routing, names),
            "topology": topology_entry(routing), "cli": redact(cli), "ops": ops_entry()}
