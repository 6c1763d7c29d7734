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
SCORES_FILE = "scores.json"
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


# Bundled datasets that moved when each suite became a package with its data beside it: a run dir made
# before records the old place (…/evals/data/…); the table maps the part after `evals/` to the new one.
MOVED_BUNDLED_DATA = {
    "data/hle_synthetic.jsonl": "agent/data/hle_synthetic.jsonl",
    "data/frames_synthetic.jsonl": "agent/data/frames_synthetic.jsonl",
    "data/agent_corpus.jsonl": "agent/data/agent_corpus.jsonl",
    "data/healthbench_synthetic.jsonl": "healthbench/data/healthbench_synthetic.jsonl",
    "data/tau2": "tau2/data",
    "data": "opencompass/data",  # the opencompass suite's root (gsm8k/, mmlu/, ARC/, bbh/, …) and each of them
}


def recorded_dataset(recorded: str) -> str:
    """Where a dataset recorded in run.json is now: a bundled set recorded before it moved (see
    MOVED_BUNDLED_DATA) at its new place when that exists; anything else as recorded."""
    path = Path(recorded)
    if path.exists() or "evals" not in path.parts:
        return recorded
    at = len(path.parts) - 1 - path.parts[::-1].index("evals")
    root, tail = Path(*path.parts[: at + 1]), "/".join(path.parts[at + 1:])
    for old in sorted(MOVED_BUNDLED_DATA, key=len, reverse=True):
        if tail == old or tail.startswith(old + "/"):
            moved = root / (MOVED_BUNDLED_DATA[old] + tail[len(old):])
            return str(moved) if moved.exists() else recorded
    return recorded

