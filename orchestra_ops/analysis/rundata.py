"""Everything `ops analyze` and `ops compare` read from a run dir, loaded once."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.profile_reader import PROFILE_FILE, Profile, read_profile
from orchestra_ops.runner.results import RESULTS_FILE, ResultsStore, TaskId
from orchestra_ops.runner.rundir import RUN_FILE, read_json_object, read_run_info

SCORES_FILE = "scores.json"
ANALYSIS_DIR = "analysis"


@dataclass
class RunData:
    run_dir: Path
    run_json: dict[str, Any] | None  # run.json (its "manifest" key: runner/manifest.py)
    scores: dict[str, Any] | None  # scores.json, as the suite wrote it
    records: list[dict[str, Any]]  # every results.jsonl line (a rerun task has several)
    final: dict[TaskId, dict[str, Any]]  # id -> its last record
    bad_result_lines: int
    profile: Profile


def load_run(run_dir: str | Path) -> RunData:
    root = Path(run_dir)
    if not root.is_dir():
        raise ConfigError(f"{root}: no such run dir")
    if not any((root / name).exists() for name in (RESULTS_FILE, PROFILE_FILE, RUN_FILE)):
        raise ConfigError(f"{root}: not a run dir (no {RESULTS_FILE}, {PROFILE_FILE} or {RUN_FILE})")
    store = ResultsStore(root)
    records = list(store.records())
    final = store.final_records()
    return RunData(run_dir=root, run_json=read_run_info(root), scores=read_json_object(root / SCORES_FILE),
                   records=records, final=final, bad_result_lines=store.bad_lines, profile=read_profile(root))
