"""What a task leaves behind: a compact line in results.jsonl and its trajectory file beside it.

The compact line (returned by the loop; the engine adds id, status, elapsed) holds what resume,
scores and `ops analyze` need and nothing long: `correct`, `pred`, `grade`, `rounds`, `answered`,
`invalid` (invalid-call codes counted), `calls` (one entry per tool call: round, tool, alias,
model, replica, status and its `expert_ms`, `retrieval_ms`, `exec_ms`, `judge_ms`), `judge` (the
CAIS verdict) and `trajectory`, the path of the trajectory file relative to the run dir.

The trajectory (`trajectories/<name>.json`) keeps everything: each round's orchestrator context,
reply and tool calls, each tool's turn record in ToolOrchestra's field names (messages, documents,
code, outputs, timings), the documents and code outputs gathered. It is written atomically (a
temp file renamed over the name) before the task's line is queued, so a line never points at a
torn or missing file; a task killed before its line reached the disk is rerun and rewrites it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from orchestra_ops.core.redact import redact

TRAJECTORY_DIR = "trajectories"
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,100}$")


def trajectory_name(task_id: Any) -> str:
    """A file name for the task: the id itself when it is a safe name, else a readable part + its hash."""
    text = str(task_id)
    if _SAFE.match(text) and not text.endswith(".tmp"):
        return f"{text}.json"
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:60].strip("._") or "task"
    digest = hashlib.sha256(json.dumps(task_id).encode()).hexdigest()[:12]
    return f"{readable}-{digest}.json"


def write_trajectory(directory: Path, task_id: Any, data: dict[str, Any]) -> str:
    """Write the trajectory atomically; return its path relative to the run dir."""
    directory.mkdir(parents=True, exist_ok=True)
    name = trajectory_name(task_id)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(redact(json.dumps(data, ensure_ascii=False, default=str)))  # the C encoder, one write
        os.replace(tmp, directory / name)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return f"{TRAJECTORY_DIR}/{name}"


def read_trajectory(run_dir: Path, record: dict[str, Any]) -> dict[str, Any] | None:
    """The trajectory a compact line points at (None when the line has none or the file is gone)."""
    relative = record.get("trajectory")
    if not isinstance(relative, str):
        return None
    try:
        data = json.loads((run_dir / relative).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
