"""`ops export RUN --format wandb --out DIR`: an offline W&B run directory (`wandb sync DIR/wandb/offline-run-*`
uploads it later).

The run's id is the run dir's `run_key` (view.py), so every export of one run dir, and its later
sync, is the same W&B run; each export writes a new `offline-run-<time>-<id>` folder. Config = the
params, summary = the metrics (also logged once as step 0 of the history), tags the run's tags as
`key=value`, and the artifacts copied into the run's files (saved with policy "now").

`wandb` is imported only here, only when called; nothing is sent anywhere (mode "offline").
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestra_ops.core.fsutil import writable_dir
from orchestra_ops.errors import ConfigError, EvalError
from orchestra_ops.export.destination import environment
from orchestra_ops.export.run_view import RunView, run_view

DEFAULT_PROJECT = "orchestra-ops"


@dataclass
class WandbExport:
    run_id: str
    run_dir: Path  # the offline-run-* folder
    metrics: int
    params: int
    files: int

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "offline_run_dir": str(self.run_dir), "metrics": self.metrics,
                "params": self.params, "files": self.files}


def export_wandb(run_dir: str | Path, *, out: str | Path, project: str = DEFAULT_PROJECT) -> WandbExport:
    """ConfigError (exit 2) when --out cannot be written: W&B is never left to pick another place."""
    out_dir = writable_dir(Path(out).resolve())
    view = run_view(run_dir)
    try:
        import wandb
    except ImportError:
        raise ConfigError("--format wandb needs the wandb package: pip install wandb (or orchestra-ops[dev])") from None
    # everything W&B writes (its cache and core logs, config, data and artifact staging) goes under --out
    private = out_dir / ".ops-wandb"  # not `.wandb`: W&B would put its runs there
    places = {f"WANDB_{name.upper()}_DIR": str(private / name) for name in ("cache", "config", "data", "artifact")}
    with environment({**places, "WANDB_DIR": str(out_dir), "WANDB_SILENT": os.environ.get("WANDB_SILENT", "true")}):
        written = _write(wandb, view, out_dir, project)
    if out_dir not in written.run_dir.parents:
        raise EvalError(f"W&B wrote the run to {written.run_dir}, outside --out {out_dir}")
    return written


def _write(wandb: Any, view: RunView, out_dir: Path, project: str) -> WandbExport:
    settings = wandb.Settings(mode="offline", silent=True, console="off", disable_git=True, x_disable_stats=True,
                              save_code=False, disable_job_creation=True)
    run = wandb.init(dir=str(out_dir), project=project, id=view.run_key, name=view.name, config=view.params,
                     tags=[f"{k}={v}"[:64] for k, v in view.tags.items()], settings=settings, reinit="create_new")
    try:
        run.log(view.metrics, step=0)
        run.summary.update(view.metrics)
        files = Path(run.dir)
        for path, folder in view.artifacts:
            target = files / folder / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            run.save(str(target), base_path=str(files), policy="now")
        offline = Path(run.dir).parent
    finally:
        run.finish()
    return WandbExport(view.run_key, offline, len(view.metrics), len(view.params), len(view.artifacts))
