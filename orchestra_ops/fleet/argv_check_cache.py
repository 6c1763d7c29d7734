"""Remember the commands this machine's vLLM accepted, so a repeated `ops up` does not pay the check again.

The check (argv_check.py) imports vLLM: 8-15 s of a 2-core machine, a third of a CPU replica's start. What
vLLM decides depends only on the vLLM install and the command, so an accepted answer is kept under a key
of both: the executable and the interpreter its shebang names (resolved paths, size and mtime: a pip
upgrade rewrites them), the argv with the port left out (each bring-up may take other ports), and the
replica's environment (less what differs per replica). A refusal is never kept: it is asked again.
Stored in `$OPS_HOME/vllm-checks.json` (written atomically; a file that does not parse is ignored).
Only checks run on this machine use it: a remote node's install cannot be seen from here.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from orchestra_ops.core.fsutil import atomic_write_text
from orchestra_ops.core.paths import ops_home

CACHE_FILE = "vllm-checks.json"
PER_REPLICA_ENV = frozenset({"CUDA_VISIBLE_DEVICES", "VLLM_CACHE_ROOT", "VLLM_CPU_OMP_THREADS_BIND"})
_LOCK = threading.Lock()


def cache_key(argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> str | None:
    """The key of one replica command (`argv` as planned, `env` the replica's own), or None when the vLLM
    executable cannot be found here (then nothing is cached)."""
    if "serve" not in argv:
        return None
    at = list(argv).index("serve")
    command = list(argv[:at])
    path = env.get("PATH", os.environ.get("PATH"))
    exe = command[0] if "/" in command[0] else shutil.which(command[0], path=path)
    if exe is None:
        return None
    exe_path = (cwd / exe).resolve()
    files = [exe_path]
    try:
        with open(exe_path, "rb") as handle:
            first = handle.readline(512)
    except OSError:
        return None
    if first.startswith(b"#!"):
        interpreter = first[2:].decode(errors="replace").split()
        if interpreter and "/" in interpreter[0]:
            files.append(Path(interpreter[0]).resolve())
    stamps = []
    for file in files:
        try:
            stat = file.stat()
        except OSError:
            return None
        stamps.append([str(file), stat.st_size, stat.st_mtime_ns])
    args = list(argv[at:])
    for index, word in enumerate(args[:-1]):
        if word == "--port":
            args[index + 1] = "*"
    body = {"exe": stamps, "command": command, "args": args, "cwd": str(cwd),
            "env": sorted((k, v) for k, v in env.items() if k not in PER_REPLICA_ENV)}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _path() -> Path:
    return ops_home() / CACHE_FILE


def _load() -> dict[str, dict[str, object]]:
    try:
        data = json.loads(_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def accepted(key: str) -> str | None:
    """The vLLM version that accepted this command before, or None."""
    with _LOCK:
        entry = _load().get(key)
    if isinstance(entry, dict) and isinstance(entry.get("version"), str):
        return str(entry["version"])
    return None


def remember(key: str, version: str) -> None:
    with _LOCK:
        data = _load()
        data[key] = {"version": version, "at": time.time()}
        with contextlib.suppress(OSError):  # a cache that cannot be written only costs the next check
            atomic_write_text(_path(), json.dumps(data, indent=1, sort_keys=True) + "\n")
