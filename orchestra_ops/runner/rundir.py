"""The run dir's `run.json`: what a run is, so `--resume` and `ops eval-status` need no flags."""

from __future__ import annotations

import fcntl
import json
import time
from pathlib import Path
from typing import Any

from orchestra_ops.core.fsutil import atomic_write_text
from orchestra_ops.errors import ConfigError

RUN_FILE = "run.json"
RUN_LOCK_FILE = ".run.json.lock"


def default_run_dir(suite: str, topology: str) -> Path:
    return Path("runs") / f"{suite}-{topology}"


def read_run_info(run_dir: str | Path) -> dict[str, Any] | None:
    return read_json_object(Path(run_dir) / RUN_FILE)


def read_json_object(path: Path) -> dict[str, Any] | None:
    """A run dir's JSON file (run.json, scores.json): None when absent; a ConfigError naming it when unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: unreadable ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not a JSON object")
    return data


def write_run_info(run_dir: str | Path, info: dict[str, Any]) -> None:
    """Merge `info` into run.json; the read-merge-write holds a lock of its own (`.run.json.lock`, not
    the run-dir lock), so the eval and its supervisor never lose each other's keys."""
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    with open(Path(run_dir) / RUN_LOCK_FILE, "a", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        previous = read_run_info(run_dir) or {}
        now = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        merged = {**previous, **info, "created": previous.get("created", now), "updated": now}
        atomic_write_text(Path(run_dir) / RUN_FILE, json.dumps(merged, indent=2) + "\n")
