"""`ops export RUN --format mlflow`: one MLflow run per ops run dir, idempotent on re-export.

The run is found again by its `ops.run_key` tag (view.py) in the experiment, and created only when
there is none. Params are logged once (MLflow never changes a param): a param whose value changed
since the last export is recorded as the tag `ops.param_changed.<key>` instead. A metric is logged
only when the run lacks it or holds another value, so a second export of the same run dir adds no
metric history. Artifacts are uploaded to the same paths (replacing the files there).

`mlflow` (mlflow-skinny is enough) is imported only here, only when called.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestra_ops.errors import ConfigError, EvalError
from orchestra_ops.export.destination import environment
from orchestra_ops.export.destination import tracking_uri as checked_uri
from orchestra_ops.export.run_view import RunView, run_view

log = logging.getLogger(__name__)

DEFAULT_EXPERIMENT = "orchestra-ops"
HTTP_LIMITS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
               "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}  # unless the user set them
METRICS_PER_BATCH = 500  # MLflow takes at most 1000 metrics, 100 params and 100 tags per log_batch
PARAMS_PER_BATCH = 100


@dataclass
class MlflowExport:
    run_id: str
    experiment_id: str
    tracking_uri: str
    created: bool
    params: int
    metrics_logged: int
    artifacts: int
    changed_params: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "experiment_id": self.experiment_id, "tracking_uri": self.tracking_uri,
                "created": self.created, "params": self.params, "metrics_logged": self.metrics_logged,
                "artifacts": self.artifacts, "changed_params": self.changed_params}


def _client(tracking_uri: str) -> Any:
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise ConfigError("--format mlflow needs the mlflow package: pip install mlflow-skinny "
                          "(or orchestra-ops[dev])") from None
    return MlflowClient(tracking_uri=tracking_uri)


def export_mlflow(run_dir: str | Path, *, tracking_uri: str, experiment: str = DEFAULT_EXPERIMENT) -> MlflowExport:
    """ConfigError (exit 2) for a URI MLflow should not use, Unreachable (exit 3) for a server that does not
    answer (destination.py), EvalError (exit 4) for what the server refused."""
    checked_uri(tracking_uri)
    view = run_view(run_dir)
    # a server that goes away mid-export: a few retries in seconds, not MLflow's default of minutes
    limits = {key: os.environ.get(key, value) for key, value in HTTP_LIMITS.items()}
    with environment(limits):
        client = _client(tracking_uri)
        from mlflow.exceptions import MlflowException

        chatter = io.StringIO()  # MLflow prints "View run at …" links; the library never prints
        try:
            with contextlib.redirect_stdout(chatter):
                return _export(client, view, tracking_uri, experiment)
        except MlflowException as exc:
            raise EvalError(f"MLflow at {tracking_uri}: {exc.message}") from None
        finally:
            if chatter.getvalue().strip():
                log.info("mlflow: %s", chatter.getvalue().strip())


def _export(client: Any, view: RunView, tracking_uri: str, experiment: str) -> MlflowExport:
    from mlflow.entities import Metric, Param, RunTag

    found = client.get_experiment_by_name(experiment)
    experiment_id = found.experiment_id if found is not None else client.create_experiment(experiment)
    runs = client.search_runs([experiment_id], filter_string=f"tags.`ops.run_key` = '{view.run_key}'",
                              max_results=2)
    created = not runs
    run = client.create_run(experiment_id, run_name=view.name, tags=view.tags) if created else runs[0]
    run_id = run.info.run_id
    have_params: dict[str, str] = dict(run.data.params) if not created else {}
    have_metrics: dict[str, float] = dict(run.data.metrics) if not created else {}
    new_params = [Param(k, v) for k, v in view.params.items() if k not in have_params]
    changed = sorted(k for k, v in view.params.items() if k in have_params and have_params[k] != v)
    tags = [RunTag(k, v) for k, v in view.tags.items()]
    tags += [RunTag(f"ops.param_changed.{k}"[:250], view.params[k][:5000]) for k in changed]
    now = int(time.time() * 1000)
    metrics = [Metric(k, v, now, 0) for k, v in view.metrics.items() if have_metrics.get(k) != v]
    for chunk in _chunks(new_params, PARAMS_PER_BATCH):
        client.log_batch(run_id, params=chunk)
    for chunk in _chunks(tags, PARAMS_PER_BATCH):
        client.log_batch(run_id, tags=chunk)
    for chunk in _chunks(metrics, METRICS_PER_BATCH):
        client.log_batch(run_id, metrics=chunk)
    for path, folder in view.artifacts:
        client.log_artifact(run_id, str(path), artifact_path=folder or None)
    client.set_terminated(run_id)
    return MlflowExport(run_id, experiment_id, tracking_uri, created, len(view.params), len(metrics),
                        len(view.artifacts), changed)


def _chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i:i + size] for i in range(0, len(items), size)]
