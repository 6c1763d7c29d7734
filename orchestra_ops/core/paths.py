"""Where orchestra-ops keeps its state: `.ops/` in the working directory, or `$OPS_HOME`."""

from __future__ import annotations

import json
import os
from pathlib import Path


def ops_home() -> Path:
    """The state root (`$OPS_HOME`, default `.ops` in the working directory)."""
    return Path(os.environ.get("OPS_HOME") or ".ops")


def topology_dir(name: str) -> Path:
    """`.ops/<topology name>/`: state.json, model_config.json and logs of one topology."""
    return ops_home() / name


def state_path(name: str) -> Path:
    """`.ops/<name>/state.json`: what `ops up` started (written by orchestra_ops.fleet.state)."""
    return topology_dir(name) / "state.json"


def endpoints_path(name: str) -> Path:
    """`.ops/<name>/model_config.json`: the endpoints file `ops up` writes once every process serves."""
    return topology_dir(name) / "model_config.json"


def latest_topology_name(*, up_only: bool = True) -> str | None:
    """The topology whose state.json changed last (the one commands default to), or None.

    With `up_only` (the default), a topology whose state says `"status": "down"` does not count.
    """
    home = ops_home()
    if not home.is_dir():
        return None
    states = [p for p in home.glob("*/state.json") if p.is_file()]
    if up_only:
        states = [p for p in states if _status(p) == "up"]
    if not states:
        return None
    return max(states, key=lambda p: p.stat().st_mtime).parent.name


def _status(path: Path) -> str | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data.get("status") if isinstance(data, dict) else None
