"""The run manifest: what a run asked, of whom, with what, so two runs can be proven equivalent.

run.json is the manifest. Next to what the eval engine records there (suite, dataset path,
models, limit, dedupe, suite_options, templates with each one's sha256), `run_manifest` adds,
before the first request:

    manifest_version                      1
    dataset_sha256                        sha256 of the dataset file's bytes (of each file's, for a directory)
    ids_sha256, ids_count                 sha256 of the ids of the units the run covers (after --limit and
                                          --dedupe, as the suite makes its units): sorted JSON texts, one a line
    judge                                 the judge roles: target, kind, served name, where, request defaults,
                                          and the suite's judge options (None for suites without a judge)
    routing                               every role: target, kind, served_name, replicas, where, and for
                                          a model its affinity (mode, load_factor: topology, then --affinity)
    topology_sha256, endpoints_file, endpoints_sha256
    cli                                   this invocation's options
    ops                                   version, git_commit, git_dirty (when known)
    invocations                           one entry per `ops eval` on this run dir: started, mode, cli, ops

Secrets never go in: a provider is recorded by its URL and the *name* of its key variable, and
values under keys named like a secret (api_key, token, secret, password …) become "<redacted>".
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import subprocess
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from orchestra_ops import __version__
from orchestra_ops.client.routing import Routing
from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.dataset import sample_id
from orchestra_ops.runner.options import PreparedRun
from orchestra_ops.runner.results import TaskId

MANIFEST_VERSION = 1
MAX_INVOCATIONS = 200
SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "credential", "credentials",
                          "authorization", "bearer", "cookie"})
JUDGE_WORDS = ("judge", "grader")


def manifest_of(run_info: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """run.json when it is a manifest (written by an `ops eval` that records one), else None."""
    if not run_info or "manifest_version" not in run_info:
        return None
    return dict(run_info)


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_dataset(path: str | Path) -> str:
    """A dataset's fingerprint: its file's sha256, or for a dataset directory (mmlu's test/ + dev/ CSVs)
    the sha256 of every file's relative path and sha256, in path order."""
    root = Path(path)
    if not root.is_dir():
        return sha256_file(root)
    digest = hashlib.sha256()
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(f"{file.relative_to(root).as_posix()}\0{sha256_file(file)}\n".encode())
    return digest.hexdigest()


def ids_sha256(ids: Iterable[TaskId]) -> str:
    """Order-free fingerprint of an id list: sha256 of the sorted JSON texts of the ids, one per line."""
    text = "\n".join(sorted(json.dumps(i, ensure_ascii=False) for i in ids))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def routing_entries(routing: Routing, names: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Every role the routing declares, then every other name the run calls."""
    rows = [_target_row(role, routing, key) for role, key in routing.roles.items()]
    for name in names:
        if name not in routing.roles:
            _, target = routing.resolve(name)
            rows.append(_target_row(name, routing, target.name))
    return rows


def _target_row(role: str, routing: Routing, key: str) -> dict[str, Any]:
    target = routing.targets[key]
    row: dict[str, Any] = {"role": role, "target": key, "kind": target.kind, "served_name": target.served_name,
                           "replicas": None if target.kind == "provider" else len(target.addresses),
                           "where": target.where}
    if target.request_defaults:
        row["request_defaults"] = redact(dict(target.request_defaults))
    if target.kind == "model":
        row["affinity"] = {"mode": target.affinity.mode, "load_factor": target.affinity.load_factor}
    return row


def judge_entry(suite: Any, routing: Routing, names: Iterable[str],
                suite_options: Mapping[str, Any]) -> dict[str, Any] | None:
    """The judge(s) a run calls: a suite's `judge_roles`, else the called names that say judge/grader."""
    names = list(names)
    declared = getattr(suite, "judge_roles", None)
    roles = [n for n in declared if n in names] if declared is not None else [n for n in names if _says(n, JUDGE_WORDS)]
    options = {k: v for k, v in suite_options.items() if _says(k, JUDGE_WORDS)}
    if not roles and not options:
        return None
    targets = []
    for role in roles:
        _, target = routing.resolve(role)
        targets.append(_target_row(role, routing, target.name))
    return {"roles": targets, "options": redact(options)}


def _says(name: str, words: Iterable[str]) -> bool:
    return any(word in name.lower() for word in words)


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
    return {"git_commit": commit.stdout.strip(),
            "git_dirty": bool(dirty.stdout.strip()) if dirty.returncode == 0 else None}


def is_secret_name(name: str) -> bool:
    """`api_key`, `access-token`, `Authorization`: yes; `max_tokens`, `api_key_env` (a variable's name): no."""
    words = [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w]
    return bool(words) and words[-1] != "env" and any(w in SECRET_WORDS for w in words)


def redact(options: Mapping[str, Any]) -> dict[str, Any]:
    """A copy with the values of secret-looking keys replaced, recursively (`*_env` names are kept)."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        if is_secret_name(str(key)) and value is not None:
            out[key] = "<redacted>"
        elif isinstance(value, Mapping):
            out[key] = redact(value)
        else:
            out[key] = value
    return out


def _hash_if_file(path: str | None) -> str | None:
    if not path:
        return None
    try:
        return sha256_file(path)
    except OSError:
        return None


def check_dataset_unchanged(run_dir: Path, recorded: Mapping[str, Any], dataset: Path) -> str:
    """The dataset's sha256; a ConfigError when it differs from the one this run dir started with."""
    digest = sha256_dataset(dataset)
    before = recorded.get("dataset_sha256")
    if before and before != digest:
        raise ConfigError(f"{run_dir} was run on {recorded.get('dataset')} with sha256 {str(before)[:12]}…; "
                          f"{dataset} now has sha256 {digest[:12]}…: the dataset changed, so resuming would "
                          "mix two datasets in one run; use another --run-dir")
    return digest


def run_manifest(run: PreparedRun, previous: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The manifest fields of run.json for this invocation of `ops eval` (`previous`: run.json before it)."""
    options = run.options
    mode = "resume" if options.resume else "retry-failed" if options.retry_failed else "new run"
    cli = dataclasses.asdict(options)
    return manifest_fields(dataset=run.dataset, dataset_sha256=run.dataset_sha256,
                           unit_ids=[sample_id(s) for s in run.samples], suite=run.suite, routing=run.routing,
                           names=run.names, suite_options=run.suite_options, cli=cli, mode=mode, previous=previous)


def manifest_fields(*, dataset: Path, dataset_sha256: str | None, unit_ids: list[TaskId], suite: Any,
                    routing: Routing, names: Iterable[str], suite_options: Mapping[str, Any], cli: Mapping[str, Any],
                    mode: str, previous: Mapping[str, Any] | None = None) -> dict[str, Any]:
    names = list(names)
    ops = ops_entry()
    history = list((previous or {}).get("invocations") or [])[-(MAX_INVOCATIONS - 1):]
    history.append({"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "mode": mode, "cli": redact(cli), "ops": ops})
    topology_file = routing.source if routing.source != routing.endpoints_file else None
    return {"manifest_version": MANIFEST_VERSION,
            "dataset_sha256": dataset_sha256 or sha256_dataset(dataset),
            "ids_sha256": ids_sha256(unit_ids), "ids_count": len(unit_ids),
            "judge": judge_entry(suite, routing, names, suite_options),
            "routing": routing_entries(routing, names),
            "topology_sha256": _hash_if_file(topology_file),
            "endpoints_file": routing.endpoints_file,
            "endpoints_sha256": _hash_if_file(routing.endpoints_file),
            "cli": redact(cli), "ops": ops, "invocations": history}
