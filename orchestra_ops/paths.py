"""Where orchestra-ops keeps its state: `.ops/` in the working directory, or `$OPS_HOME`."""

from __future__ import annotations

import os
from pathlib import Path


def ops_home() -> Path:
    """The state root (`$OPS_HOME`, default `.ops` in the working directory)."""
    return Path(os.environ.get("OPS_HOME") or ".ops")


def topology_dir(name: str) -> Path:
    """`.ops/<topology name>/`: state.json, model_config.json and logs of one topology."""
    return ops_home() / name
